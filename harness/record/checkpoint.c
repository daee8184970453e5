/* Checkpoints (checkpoint.h): one replica's weights, momenta, step, streams and hashing
 * state in a versioned, checksummed binary file written atomically; reading it back with
 * every field checked; and the config comparison that says which keys differ when a
 * checkpoint or a results folder belongs to another config.
 * Data path (docs/DESIGN.md): harness/train -> <replica>/checkpoint.bin -> harness/train. */
#include "harness/record/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "harness/record/outdir.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are little-endian; this host is not"
#endif

enum {
    MAGIC_BYTES = 8,
    PREFIX_BYTES = MAGIC_BYTES + 4 + 4 + 8, /* magic, version, reserved, length */
    MAX_PARAMS = 256,
};

/* Largest element count a reader accepts (far above any model, far below overflow). */
#define MAX_COUNT ((int64_t)1 << 40)

void dt_checkpoint_path(char *buf, size_t size, const char *replica_dir)
{
    snprintf(buf, size, "%s/%s", replica_dir, DT_CHECKPOINT_FILE);
}

char *dt_checkpoint_config_text(const struct dt_experiment *exp)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    DT_ASSERT(mem != NULL);
    dt_config_write_json(mem, exp);
    DT_ASSERT(fclose(mem) == 0);
    return text;
}

enum dt_status dt_experiment_diff(char *buf, size_t size, bool *differ,
                                  const struct dt_experiment *a, const struct dt_experiment *b,
                                  bool cells_may_differ, struct dt_error *err)
{
    struct dt_experiment *y = dt_xcalloc(1, sizeof *y);
    *y = *b; /* what may differ: b's copy takes a's */
    memcpy(y->name, a->name, sizeof y->name);
    memcpy(y->source, a->source, sizeof y->source);
    y->backend = a->backend;
    y->report = a->report;
    if (cells_may_differ) {
        y->n_policies = a->n_policies;
        memcpy(y->policies, a->policies, sizeof y->policies);
        y->n_vary = a->n_vary;
        memcpy(y->vary_sets, a->vary_sets, sizeof y->vary_sets);
        y->replicas = a->replicas;
        y->hash = a->hash;
    }
    char *ta = dt_checkpoint_config_text(a), *tb = dt_checkpoint_config_text(y);
    enum dt_status st = dt_checkpoint_config_diff(buf, size, differ, ta, "A", tb, "B", err);
    free(ta), free(tb), free(y);
    return st;
}

/* ---- the config as "dotted.key=value" lines ------------------------------------------ */

/* Keys a resume may change: the trace does not depend on them (checkpoint.h). */
static bool key_may_change(const char *key)
{
    return strcmp(key, "train.steps") == 0 || strcmp(key, "train.checkpoint_every") == 0 ||
           strcmp(key, "train.check_finite") == 0 ||
           strcmp(key, "train.checkpoint_at_divergence") == 0 || strcmp(key, "hash.async") == 0 ||
           strncmp(key, "report.", 7) == 0;
}

struct json_scan {
    const char *s;
    size_t i;
};

static void skip_ws(struct json_scan *j)
{
    while (j->s[j->i] == ' ' || j->s[j->i] == '\n' || j->s[j->i] == '\r' || j->s[j->i] == '\t')
        j->i++;
}

/* At '"': past the closing quote. */
static bool scan_string(struct json_scan *j)
{
    if (j->s[j->i] != '"') return false;
    for (j->i++; j->s[j->i] && j->s[j->i] != '"'; j->i++)
        if (j->s[j->i] == '\\' && j->s[j->i + 1]) j->i++;
    if (j->s[j->i] != '"') return false;
    j->i++;
    return true;
}

/* Past one value of any kind (strings, numbers, literals, nested lists and objects). */
static bool scan_value(struct json_scan *j)
{
    char c = j->s[j->i];
    if (c == '"') return scan_string(j);
    if (c == '[' || c == '{') {
        int depth = 0;
        while (j->s[j->i]) {
            c = j->s[j->i];
            if (c == '"') {
                if (!scan_string(j)) return false;
                continue;
            }
            if (c == '[' || c == '{') depth++;
            if (c == ']' || c == '}') depth--;
            j->i++;
            if (depth == 0) return true;
        }
        return false;
    }
    size_t start = j->i;
    while (j->s[j->i] && !strchr(",]} \n\r\t", j->s[j->i])) j->i++;
    return j->i > start;
}

/* One object at j (at '{'): its leaves as lines under `prefix`. */
static bool flatten_object(struct json_scan *j, const char *prefix, struct dt_strbuf *out,
                           int depth)
{
    if (depth > 8 || j->s[j->i] != '{') return false;
    j->i++;
    skip_ws(j);
    if (j->s[j->i] == '}') {
        j->i++;
        return true;
    }
    for (;;) {
        skip_ws(j);
        size_t k0 = j->i;
        if (!scan_string(j)) return false;
        char key[256];
        int n = snprintf(key, sizeof key, "%s%s%.*s", prefix, prefix[0] ? "." : "",
                         (int)(j->i - k0 - 2), j->s + k0 + 1);
        if (n < 0 || (size_t)n >= sizeof key) return false;
        skip_ws(j);
        if (j->s[j->i] != ':') return false;
        j->i++;
        skip_ws(j);
        if (j->s[j->i] == '{') {
            if (!flatten_object(j, key, out, depth + 1)) return false;
        } else {
            size_t v0 = j->i;
            if (!scan_value(j)) return false;
            if (!key_may_change(key))
                dt_strbuf_printf(out, "%s=%.*s\n", key, (int)(j->i - v0), j->s + v0);
        }
        skip_ws(j);
        if (j->s[j->i] == ',') {
            j->i++;
            continue;
        }
        if (j->s[j->i] != '}') return false;
        j->i++;
        return true;
    }
}

enum dt_status dt_checkpoint_config_lines(struct dt_strbuf *out, const char *json, const char *what,
                                          struct dt_error *err)
{
    struct json_scan j = {.s = json, .i = 0};
    out->len = 0;
    dt_strbuf_printf(out, "%s", ""); /* never NULL data, even for {} */
    skip_ws(&j);
    bool ok = flatten_object(&j, "", out, 0);
    skip_ws(&j);
    if (!ok || j.s[j.i] != '\0')
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: not a detrain config (malformed JSON near byte %zu)", what, j.i);
    return DT_OK;
}

/* The value of `key` in lines ("key=value\n"...), as a pointer and length; NULL if absent. */
static const char *find_line(const char *lines, const char *key, size_t key_len, int *len)
{
    for (const char *p = lines; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) break;
        if ((size_t)(eol - p) > key_len && strncmp(p, key, key_len) == 0 && p[key_len] == '=') {
            *len = (int)(eol - p - (ptrdiff_t)key_len - 1);
            return p + key_len + 1;
        }
        p = eol + 1;
    }
    return NULL;
}

/* Append "key (a: va, b: vb)" for every key of `lines_a` whose value in `lines_b` differs
 * (or is absent); `only_missing` lists only the keys absent from lines_b. */
static void diff_lines(struct dt_strbuf *sb, int *n_diff, const char *lines_a, const char *name_a,
                       const char *lines_b, const char *name_b, bool a_first, bool only_missing)
{
    for (const char *p = lines_a; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) break;
        const char *eq = memchr(p, '=', (size_t)(eol - p));
        if (eq) {
            int vb_len = 0;
            const char *vb = find_line(lines_b, p, (size_t)(eq - p), &vb_len);
            int va_len = (int)(eol - eq - 1);
            bool differs =
                vb ? !only_missing && (va_len != vb_len || strncmp(eq + 1, vb, (size_t)va_len) != 0)
                   : true;
            if (differs) {
                if (++*n_diff <= 4) {
                    const char *first = a_first ? eq + 1 : vb, *second = a_first ? vb : eq + 1;
                    int first_len = a_first ? va_len : vb_len;
                    int second_len = a_first ? vb_len : va_len;
                    dt_strbuf_printf(sb, "%s%.*s (%s: %.*s, %s: %.*s)", *n_diff > 1 ? "; " : "",
                                     (int)(eq - p), p, name_a, first ? first_len : 6,
                                     first ? first : "absent", name_b, second ? second_len : 6,
                                     second ? second : "absent");
                }
            }
        }
        p = eol + 1;
    }
}

/* A config JSON as this build writes it: loaded (every key it lacks takes its default: a
 * file from an older build, written before keys were added) and written again. NULL when
 * this build cannot load it (a key it does not know, a value out of range): the text is
 * then compared as it is, and the diff names what differs. */
static char *normalized_config(const char *json)
{
    struct dt_experiment *e = dt_xcalloc(1, sizeof *e);
    struct dt_error ignored = {0};
    char *text = NULL;
    if (dt_config_load_text(e, "config.json", json, strlen(json), -1, NULL, 0, &ignored) == DT_OK &&
        e->n_matrix == 0)
        text = dt_checkpoint_config_text(e);
    free(e);
    return text;
}

enum dt_status dt_checkpoint_config_diff(char *buf, size_t size, bool *differ, const char *json_a,
                                         const char *name_a, const char *json_b, const char *name_b,
                                         struct dt_error *err)
{
    struct dt_strbuf a = {0}, b = {0}, sb = {0};
    char *norm_a = normalized_config(json_a), *norm_b = normalized_config(json_b);
    enum dt_status st = dt_checkpoint_config_lines(&a, norm_a ? norm_a : json_a, name_a, err);
    if (st == DT_OK) st = dt_checkpoint_config_lines(&b, norm_b ? norm_b : json_b, name_b, err);
    free(norm_a);
    free(norm_b);
    *differ = false;
    if (size) buf[0] = '\0';
    if (st == DT_OK) {
        int n = 0;
        diff_lines(&sb, &n, a.data, name_a, b.data, name_b, true, false);
        diff_lines(&sb, &n, b.data, name_a, a.data, name_b, false, true); /* keys only in b */
        if (n > 4) dt_strbuf_printf(&sb, "; and %d more key%s", n - 4, n - 4 == 1 ? "" : "s");
        *differ = n > 0;
        if (n > 0) dt_sanitize_message(buf, size, sb.data); /* values come from files */
    }
    dt_strbuf_free(&a);
    dt_strbuf_free(&b);
    dt_strbuf_free(&sb);
    return st;
}

/* SHA-256 over the lines of a config JSON. */
static enum dt_status config_digest(uint8_t out[DT_DIGEST_BYTES], const char *json,
                                    const char *what, struct dt_error *err)
{
    struct dt_strbuf lines = {0};
    enum dt_status st = dt_checkpoint_config_lines(&lines, json, what, err);
    if (st == DT_OK) dt_sha256(out, lines.data, lines.len);
    dt_strbuf_free(&lines);
    return st;
}

/* ---- writing ------------------------------------------------------------------------ */

struct bytes {
    unsigned char *p;
    size_t len, cap;
};

static void put(struct bytes *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        b->p = dt_xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}
static void put_u32(struct bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_i32(struct bytes *b, int32_t v) { put(b, &v, 4); }
static void put_u64(struct bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_i64(struct bytes *b, int64_t v) { put(b, &v, 8); }
static void put_str(struct bytes *b, const char *s)
{
    size_t n = strlen(s);
    DT_ASSERT(n < UINT32_MAX);
    put_u32(b, (uint32_t)n);
    put(b, s, n);
}

static int hex_nibble(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* 64 lowercase hex characters into 32 bytes; false when it is not that. */
static bool hex_to_digest(uint8_t out[DT_DIGEST_BYTES], const char *hex)
{
    if (strlen(hex) != 2 * DT_DIGEST_BYTES) return false;
    for (int i = 0; i < DT_DIGEST_BYTES; i++) {
        int hi = hex_nibble(hex[2 * i]), lo = hex_nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* The model digest of n_params tensors of `values` (back to back) with these names. */
static void weights_digest(char hex[DT_DIGEST_HEX], const char *const *names,
                           const float *const *values, const int64_t *counts, int n)
{
    uint8_t(*d)[DT_DIGEST_BYTES] = dt_xcalloc((size_t)n + 1, DT_DIGEST_BYTES);
    for (int i = 0; i < n; i++) dt_sha256_f32(d[i], values[i], counts[i]);
    uint8_t md[DT_DIGEST_BYTES];
    dt_model_digest(md, names, (const uint8_t(*)[DT_DIGEST_BYTES])d, n);
    dt_digest_hex(hex, md);
    free(d);
}

/* Write, fflush, fsync, rename, then fsync the folder so the rename itself is durable. */
static enum dt_status write_atomic(const char *path, const void *data, size_t n,
                                   struct dt_error *err)
{
    char tmp[1400];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return dt_error_set(err, DT_ERR_IO, "%s: path too long", path);
    (void)unlink(tmp); /* a stale one goes; a link planted there is removed, not followed */
    FILE *f = dt_out_fopen(tmp, false, err);
    if (!f) return DT_ERR_IO;
    bool ok = fwrite(data, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        remove(tmp);
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot rename into place: %s", path, strerror(e));
    }
    char dir[1400];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        int rc = fsync(fd);
        e = errno;
        close(fd);
        if (rc != 0 && e != EINVAL) /* some file systems cannot sync a folder */
            return dt_error_set(err, DT_ERR_IO, "%s: cannot flush the folder: %s", dir,
                                strerror(e));
    }
    return DT_OK;
}

enum dt_status dt_checkpoint_write(const char *path, const struct dt_experiment *exp,
                                   const struct dt_policy *pol, struct dt_model *m,
                                   const struct dt_checkpoint_info *info, struct dt_error *err)
{
    DT_ASSERT(m->n_tensors >= 1 && m->n_tensors <= MAX_PARAMS);
    struct bytes b = {0};
    put(&b, DT_CHECKPOINT_MAGIC, MAGIC_BYTES);
    put_u32(&b, DT_CHECKPOINT_VERSION);
    put_u32(&b, 0);
    const size_t length_at = b.len;
    put_u64(&b, 0); /* the length, filled in at the end */
    put_i64(&b, m->step);
    put_u64(&b, m->seed);
    put_u32(&b, m->member);
    put_u32(&b, 0);
    put_u64(&b, info->init_stream);
    put_u64(&b, info->order_stream);
    put_i64(&b, info->order_position);
    char controls[256];
    dt_policy_describe(controls, sizeof controls, pol);
    put_str(&b, pol->name);
    put_str(&b, controls);
    char *config = dt_checkpoint_config_text(exp);
    uint8_t digest[DT_DIGEST_BYTES];
    DT_ASSERT(config_digest(digest, config, "the resolved config", NULL) == DT_OK);
    put(&b, digest, sizeof digest);
    put_str(&b, config);
    free(config);
    uint8_t traced[DT_DIGEST_BYTES] = {0};
    if (info->traced_step >= 0) DT_ASSERT(hex_to_digest(traced, info->traced_digest));
    put_i64(&b, info->traced_step);
    put(&b, traced, sizeof traced);

    /* every tensor's w and v on the host, then the digest of w */
    const int n = m->n_tensors;
    struct dt_model_state host = {0};
    dt_model_state_save(&host, m);
    const char **names = dt_xcalloc((size_t)n, sizeof *names);
    int64_t *counts = dt_xcalloc((size_t)n, sizeof *counts);
    for (int i = 0; i < n; i++) {
        names[i] = m->params[i].name;
        counts[i] = m->params[i].n;
    }
    char model_hex[DT_DIGEST_HEX];
    weights_digest(model_hex, names, (const float *const *)host.w, counts, n);
    uint8_t model_digest[DT_DIGEST_BYTES];
    DT_ASSERT(hex_to_digest(model_digest, model_hex));
    put(&b, model_digest, sizeof model_digest);
    put_i32(&b, n);
    put_i32(&b, 0);
    for (int i = 0; i < n; i++) {
        const struct dt_param *p = &m->params[i];
        put_str(&b, p->name);
        put_i32(&b, p->ndim);
        put_i32(&b, host.s[i] ? 1 : 0); /* flags: the second moment follows */
        for (int d = 0; d < 4; d++) put_i64(&b, d < p->ndim ? p->shape[d] : 0);
        put_i64(&b, p->n);
    }
    for (int i = 0; i < n; i++) {
        put(&b, host.w[i], (size_t)counts[i] * sizeof(float));
        put(&b, host.v[i], (size_t)counts[i] * sizeof(float));
        if (host.s[i]) put(&b, host.s[i], (size_t)counts[i] * sizeof(float));
    }
    dt_model_state_free(&host);
    free(names);
    free(counts);
    const uint64_t total = (uint64_t)b.len + DT_DIGEST_BYTES;
    memcpy(b.p + length_at, &total, 8);
    uint8_t sum[DT_DIGEST_BYTES];
    dt_sha256(sum, b.p, b.len);
    put(&b, sum, sizeof sum);
    enum dt_status st = write_atomic(path, b.p, b.len, err);
    free(b.p);
    return st;
}

/* ---- reading ------------------------------------------------------------------------ */

struct cursor {
    const unsigned char *p;
    size_t len, pos;
};

/* The next n bytes, or NULL when fewer are left. */
static const unsigned char *take(struct cursor *c, size_t n)
{
    if (n > c->len - c->pos) return NULL;
    const unsigned char *r = c->p + c->pos;
    c->pos += n;
    return r;
}
static bool take_u32(struct cursor *c, uint32_t *v)
{
    const unsigned char *r = take(c, 4);
    if (r) memcpy(v, r, 4);
    return r != NULL;
}
static bool take_u64(struct cursor *c, uint64_t *v)
{
    const unsigned char *r = take(c, 8);
    if (r) memcpy(v, r, 8);
    return r != NULL;
}
static bool take_i64(struct cursor *c, int64_t *v) { return take_u64(c, (uint64_t *)v); }
/* A string into buf (capacity size, NUL added); false when too long or past the end. */
static bool take_str(struct cursor *c, char *buf, size_t size)
{
    uint32_t n;
    if (!take_u32(c, &n) || n >= size) return false;
    const unsigned char *r = take(c, n);
    if (!r || memchr(r, '\0', n)) return false;
    memcpy(buf, r, n);
    buf[n] = '\0';
    return true;
}

void dt_checkpoint_free(struct dt_checkpoint *ck)
{
    if (ck->params)
        for (int i = 0; i < ck->n_params; i++) {
            free(ck->params[i].w);
            free(ck->params[i].v);
            free(ck->params[i].s);
        }
    free(ck->params);
    free(ck->config_json);
    memset(ck, 0, sizeof *ck);
}

#define MALFORMED(what) dt_error_set(err, DT_ERR_DATA, "%s: malformed checkpoint: %s", path, what)

/* The fields after the length, each checked against what is left before the checksum. */
static enum dt_status parse_fields(struct dt_checkpoint *ck, struct cursor *c, const char *path,
                                   struct dt_error *err)
{
    uint32_t reserved = 0;
    if (!take_i64(c, &ck->step) || !take_u64(c, &ck->seed) || !take_u32(c, &ck->member) ||
        !take_u32(c, &reserved) || !take_u64(c, &ck->init_stream) ||
        !take_u64(c, &ck->order_stream) || !take_i64(c, &ck->order_position))
        return MALFORMED("header fields run past the end");
    if (ck->step < 0 || reserved != 0) return MALFORMED("bad step or reserved field");
    if (!take_str(c, ck->policy, sizeof ck->policy) ||
        !take_str(c, ck->controls, sizeof ck->controls))
        return MALFORMED("policy name or controls");
    const unsigned char *d = take(c, DT_DIGEST_BYTES);
    if (!d) return MALFORMED("config digest");
    memcpy(ck->config_digest, d, DT_DIGEST_BYTES);
    uint32_t n_json;
    if (!take_u32(c, &n_json) || n_json > c->len - c->pos) return MALFORMED("config JSON");
    ck->config_json = dt_xmalloc((size_t)n_json + 1);
    memcpy(ck->config_json, take(c, n_json), n_json);
    ck->config_json[n_json] = '\0';
    if (memchr(ck->config_json, '\0', n_json)) return MALFORMED("config JSON holds a NUL byte");
    if (!take_i64(c, &ck->traced_step) || !(d = take(c, DT_DIGEST_BYTES)))
        return MALFORMED("last traced step");
    if (ck->traced_step < -1 || ck->traced_step > ck->step)
        return MALFORMED("last traced step out of range");
    dt_digest_hex(ck->traced_digest, d);
    if (!(d = take(c, DT_DIGEST_BYTES))) return MALFORMED("model digest");
    dt_digest_hex(ck->model_digest, d);
    uint32_t n_params, zero;
    if (!take_u32(c, &n_params) || !take_u32(c, &zero) || zero != 0)
        return MALFORMED("parameter count");
    if (n_params < 1 || n_params > MAX_PARAMS) return MALFORMED("parameter count out of range");
    ck->n_params = (int)n_params;
    ck->params = dt_xcalloc(n_params, sizeof *ck->params);
    for (uint32_t i = 0; i < n_params; i++) {
        struct dt_checkpoint_param *p = &ck->params[i];
        uint32_t ndim, flags;
        if (!take_str(c, p->name, sizeof p->name) || !take_u32(c, &ndim) || !take_u32(c, &flags) ||
            flags > 1 || ndim < 1 || ndim > 4)
            return MALFORMED("parameter table");
        p->has_s = flags != 0;
        p->ndim = (int)ndim;
        int64_t prod = 1;
        for (int k = 0; k < 4; k++) {
            if (!take_i64(c, &p->shape[k])) return MALFORMED("parameter table");
            if (k < p->ndim && (p->shape[k] < 1 || p->shape[k] > MAX_COUNT))
                return MALFORMED("parameter shape out of range");
            /* prod <= MAX_COUNT and shape <= MAX_COUNT: the test divides instead of
             * multiplying past int64 (a fuzzed shape found it) */
            if (k < p->ndim && prod > MAX_COUNT / p->shape[k])
                return MALFORMED("parameter shape out of range");
            if (k < p->ndim) prod *= p->shape[k];
        }
        if (!take_i64(c, &p->n) || p->n != prod) return MALFORMED("parameter count vs shape");
    }
    for (int i = 0; i < ck->n_params; i++) {
        struct dt_checkpoint_param *p = &ck->params[i];
        const size_t bytes = (size_t)p->n * sizeof(float);
        const unsigned char *w = take(c, bytes), *v = w ? take(c, bytes) : NULL;
        const unsigned char *s = v && p->has_s ? take(c, bytes) : NULL;
        if (!v || (p->has_s && !s)) return MALFORMED("parameter values run past the end");
        p->w = dt_xmalloc(bytes);
        p->v = dt_xmalloc(bytes);
        memcpy(p->w, w, bytes);
        memcpy(p->v, v, bytes);
        if (s) {
            p->s = dt_xmalloc(bytes);
            memcpy(p->s, s, bytes);
        }
    }
    if (c->pos != c->len)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: malformed checkpoint: %zu unexplained bytes before the checksum",
                            path, c->len - c->pos);
    /* the values must be the weights the writer hashed */
    const char **names = dt_xcalloc((size_t)ck->n_params, sizeof *names);
    const float **vals = dt_xcalloc((size_t)ck->n_params, sizeof *vals);
    int64_t *counts = dt_xcalloc((size_t)ck->n_params, sizeof *counts);
    for (int i = 0; i < ck->n_params; i++) {
        names[i] = ck->params[i].name;
        vals[i] = ck->params[i].w;
        counts[i] = ck->params[i].n;
    }
    char hex[DT_DIGEST_HEX];
    weights_digest(hex, names, vals, counts, ck->n_params);
    free(names);
    free(vals);
    free(counts);
    if (strcmp(hex, ck->model_digest) != 0)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: the weights' model digest %s is not the recorded %s", path, hex,
                            ck->model_digest);
    return DT_OK;
}

/* The fixed prefix (magic, version, reserved, length) against the file's size: `buf` holds
 * the first min(size, PREFIX_BYTES) bytes. Checked before the rest is read, so a file can
 * never be read past the length its header gives. */
static enum dt_status check_prefix(const unsigned char *buf, size_t size, const char *path,
                                   struct dt_error *err)
{
    size_t cmp = size < MAGIC_BYTES ? size : MAGIC_BYTES;
    if (memcmp(buf, DT_CHECKPOINT_MAGIC, cmp) != 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: not a detrain checkpoint (bad magic)", path);
    if (size < PREFIX_BYTES + DT_DIGEST_BYTES)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated checkpoint: expected at least %d bytes, found %zu", path,
                            PREFIX_BYTES + DT_DIGEST_BYTES, size);
    uint32_t version, reserved;
    uint64_t length;
    memcpy(&version, buf + 8, 4);
    memcpy(&reserved, buf + 12, 4);
    memcpy(&length, buf + 16, 8);
    if (version != DT_CHECKPOINT_VERSION)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: checkpoint format version %" PRIu32 "; this detrain reads "
                            "version %d",
                            path, version, DT_CHECKPOINT_VERSION);
    if (reserved != 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: malformed checkpoint: reserved field", path);
    if (length > size)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated checkpoint: expected %" PRIu64 " bytes, found %zu", path,
                            length, size);
    if (length < size)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: %zu trailing bytes after the %" PRIu64 "-byte checkpoint", path,
                            size - (size_t)length, length);
    return DT_OK;
}

static enum dt_status read_checked(struct dt_checkpoint *ck, const unsigned char *buf, size_t size,
                                   const char *path, struct dt_error *err)
{
    DT_FORWARD_IF_ERROR(check_prefix(buf, size, path, err));
    uint8_t sum[DT_DIGEST_BYTES];
    dt_sha256(sum, buf, size - DT_DIGEST_BYTES);
    if (memcmp(sum, buf + size - DT_DIGEST_BYTES, DT_DIGEST_BYTES) != 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: checksum mismatch: the checkpoint is corrupted",
                            path);
    struct cursor c = {.p = buf, .len = size - DT_DIGEST_BYTES, .pos = PREFIX_BYTES};
    return parse_fields(ck, &c, path, err);
}

enum dt_status dt_checkpoint_read(struct dt_checkpoint *ck, const char *path, struct dt_error *err)
{
    memset(ck, 0, sizeof *ck);
    int fd;
    int64_t file_size;
    DT_FORWARD_IF_ERROR(dt_open_regular(&fd, path, "a checkpoint", &file_size, err));
    /* the header's length must be the file's size before the file is read: the read is
     * bounded by both */
    unsigned char prefix[PREFIX_BYTES];
    const size_t size = (size_t)file_size;
    size_t got = 0;
    enum dt_status st =
        dt_read_fd(fd, prefix, size < PREFIX_BYTES ? size : PREFIX_BYTES, &got, path, err);
    if (st == DT_OK && got < (size < PREFIX_BYTES ? size : PREFIX_BYTES))
        st = dt_error_set(err, DT_ERR_DATA,
                          "%s: truncated checkpoint: the file shrank while "
                          "it was read",
                          path);
    if (st == DT_OK) st = check_prefix(prefix, size, path, err);
    unsigned char *buf = NULL;
    if (st == DT_OK) {
        buf = malloc(size);
        if (!buf)
            st = dt_error_set(err, DT_ERR_NOMEM,
                              "%s: out of memory reading a %zu-byte "
                              "checkpoint",
                              path, size);
    }
    if (st == DT_OK) {
        memcpy(buf, prefix, PREFIX_BYTES);
        st = dt_read_fd(fd, buf + PREFIX_BYTES, size - PREFIX_BYTES, &got, path, err);
        if (st == DT_OK && got != size - PREFIX_BYTES)
            st = dt_error_set(err, DT_ERR_DATA,
                              "%s: truncated checkpoint: expected %zu bytes, "
                              "found %zu",
                              path, size, PREFIX_BYTES + got);
    }
    close(fd);
    if (st == DT_OK) st = read_checked(ck, buf, size, path, err);
    free(buf);
    if (st != DT_OK) dt_checkpoint_free(ck);
    return st;
}

/* ---- checking it against this run ----------------------------------------------------- */

static void shape_text(char *buf, size_t size, int ndim, const int64_t *shape)
{
    int n = snprintf(buf, size, "(");
    for (int d = 0; d < ndim && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ")");
}

enum dt_status dt_checkpoint_check(const struct dt_checkpoint *ck, const char *path,
                                   const struct dt_experiment *exp, const struct dt_policy *pol,
                                   const struct dt_model *m, const struct dt_checkpoint_info *want,
                                   uint32_t member, struct dt_error *err)
{
    char *config = dt_checkpoint_config_text(exp);
    uint8_t digest[DT_DIGEST_BYTES];
    DT_ASSERT(config_digest(digest, config, "the resolved config", NULL) == DT_OK);
    bool config_same = memcmp(digest, ck->config_digest, DT_DIGEST_BYTES) == 0;
    if (!config_same) { /* a checkpoint of an older build: its config read with this build's
                           defaults */
        char *norm = normalized_config(ck->config_json);
        uint8_t old[DT_DIGEST_BYTES];
        config_same = norm && config_digest(old, norm, "the checkpoint's config", NULL) == DT_OK &&
                      memcmp(old, digest, DT_DIGEST_BYTES) == 0;
        free(norm);
    }
    if (!config_same) {
        char diff[800];
        bool differ = false;
        enum dt_status st = dt_checkpoint_config_diff(diff, sizeof diff, &differ, ck->config_json,
                                                      "checkpoint", config, "this config", err);
        free(config);
        if (st != DT_OK) return st;
        return dt_error_set(err, DT_ERR_CONFIG, "%s: written under another config: %s", path,
                            differ ? diff : "the recorded config digest differs");
    }
    free(config);
    char controls[256];
    dt_policy_describe(controls, sizeof controls, pol);
    if (strcmp(ck->policy, pol->name) != 0 || strcmp(ck->controls, controls) != 0) {
        char ck_policy[160], ck_controls[400];
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: written under policy '%s' (%s); this replica trains under '%s' "
                            "(%s)",
                            path, dt_escape_str(ck_policy, sizeof ck_policy, ck->policy),
                            dt_escape_bytes(ck_controls, sizeof ck_controls, ck->controls,
                                            strlen(ck->controls), sizeof ck_controls),
                            pol->name, controls);
    }
    if (ck->seed != exp->train.seed)
        return dt_error_set(err, DT_ERR_CONFIG, "%s: seed %" PRIu64 ", train.seed is %" PRIu64,
                            path, ck->seed, exp->train.seed);
    if (ck->init_stream != want->init_stream || ck->order_stream != want->order_stream ||
        ck->member != member)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: written for another replica (streams init %" PRIu64
                            ", data_order %" PRIu64 ", epsilon member %" PRIu32
                            "; this replica has %" PRIu64 ", %" PRIu64 ", %" PRIu32 ")",
                            path, ck->init_stream, ck->order_stream, ck->member, want->init_stream,
                            want->order_stream, member);
    if (ck->step > exp->train.steps)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: checkpoint at step %" PRId64 " is past train.steps %" PRId64, path,
                            ck->step, exp->train.steps);
    if (ck->order_position != ck->step * exp->train.batch)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: data-order position %" PRId64 " is not step %" PRId64
                            " x batch %" PRId64,
                            path, ck->order_position, ck->step, exp->train.batch);
    if (ck->n_params != m->n_tensors)
        return dt_error_set(err, DT_ERR_DATA, "%s: %d parameters; the model has %d", path,
                            ck->n_params, m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) {
        const struct dt_checkpoint_param *a = &ck->params[i];
        const struct dt_param *b = &m->params[i];
        bool same = strcmp(a->name, b->name) == 0 && a->ndim == b->ndim && a->n == b->n;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) {
            char sa[96], sb[96];
            shape_text(sa, sizeof sa, a->ndim, a->shape);
            shape_text(sb, sizeof sb, b->ndim, b->shape);
            return dt_error_set(err, DT_ERR_DATA, "%s: parameter %d is %s %s; the model's is %s %s",
                                path, i, a->name, sa, b->name, sb);
        }
    }
    return DT_OK;
}

void dt_checkpoint_apply(const struct dt_checkpoint *ck, struct dt_model *m)
{
    DT_ASSERT(ck->n_params == m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) {
        const size_t bytes = (size_t)m->params[i].n * sizeof(float);
        dt_backend_upload(m->be, m->params[i].w, ck->params[i].w, bytes);
        dt_backend_upload(m->be, m->params[i].v, ck->params[i].v, bytes);
        if (ck->params[i].s) {
            if (!m->params[i].s) m->params[i].s = dt_backend_alloc(m->be, bytes);
            dt_backend_upload(m->be, m->params[i].s, ck->params[i].s, bytes);
        } else if (m->params[i].s) { /* saved before AdamW's first step: no moment yet */
            dt_backend_free(m->be, m->params[i].s);
            m->params[i].s = NULL;
        }
    }
    m->step = ck->step;
    m->seed = ck->seed;
    m->member = ck->member;
}
