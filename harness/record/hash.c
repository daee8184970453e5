/* SHA-256 through OpenSSL EVP and the model digest; see hash.h for the canonical form. */
#include "harness/record/hash.h"

#include <openssl/evp.h>
#include <string.h>

#include "core/tree_hash_host.h"

static EVP_MD_CTX *hash_begin(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    DT_ASSERT_MSG(ctx != NULL, "EVP_MD_CTX_new failed");
    DT_ASSERT_MSG(EVP_DigestInit_ex(ctx, dt_sha256_md(), NULL) == 1, "SHA-256 init failed");
    return ctx;
}

static void hash_update(EVP_MD_CTX *ctx, const void *data, size_t bytes)
{
    DT_ASSERT_MSG(EVP_DigestUpdate(ctx, data, bytes) == 1, "SHA-256 update failed");
}

static void hash_end(EVP_MD_CTX *ctx, uint8_t out[DT_DIGEST_BYTES])
{
    unsigned int len = 0;
    DT_ASSERT_MSG(EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == DT_DIGEST_BYTES,
                  "SHA-256 final failed");
    EVP_MD_CTX_free(ctx);
}

void dt_sha256(uint8_t out[DT_DIGEST_BYTES], const void *data, size_t bytes)
{
    EVP_MD_CTX *ctx = hash_begin();
    hash_update(ctx, data, bytes);
    hash_end(ctx, out);
}

void dt_sha256_f32(uint8_t out[DT_DIGEST_BYTES], const float *v, int64_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* The in-memory bytes are already canonical: hash them without a copy. */
    dt_sha256(out, v, (size_t)n * sizeof(float));
#else
    EVP_MD_CTX *ctx = hash_begin();
    uint8_t buf[4096];
    int64_t i = 0;
    while (i < n) {
        int64_t m = n - i < 1024 ? n - i : 1024;
        for (int64_t j = 0; j < m; j++) {
            uint32_t u;
            memcpy(&u, &v[i + j], 4);
            buf[4 * j + 0] = (uint8_t)u;
            buf[4 * j + 1] = (uint8_t)(u >> 8);
            buf[4 * j + 2] = (uint8_t)(u >> 16);
            buf[4 * j + 3] = (uint8_t)(u >> 24);
        }
        hash_update(ctx, buf, (size_t)m * 4);
        i += m;
    }
    hash_end(ctx, out);
#endif
}

void dt_model_digest(uint8_t out[DT_DIGEST_BYTES], const char *const *names,
                     const uint8_t (*digests)[DT_DIGEST_BYTES], int n)
{
    EVP_MD_CTX *ctx = hash_begin();
    static const uint8_t zero = 0;
    for (int i = 0; i < n; i++) {
        hash_update(ctx, names[i], strlen(names[i]));
        hash_update(ctx, &zero, 1);
        hash_update(ctx, digests[i], DT_DIGEST_BYTES);
    }
    hash_end(ctx, out);
}

void dt_digest_hex(char out[DT_DIGEST_HEX], const uint8_t d[DT_DIGEST_BYTES])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < DT_DIGEST_BYTES; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * DT_DIGEST_BYTES] = '\0';
}

void dt_tensor_digest_host(uint8_t out[DT_DIGEST_BYTES], const float *v, int64_t n, bool tree)
{
    if (tree) dt_tree_digest_host(out, v, (uint64_t)n * sizeof(float));
    else dt_sha256_f32(out, v, n);
}

const uint8_t *dt_hash_model_digests_begin(struct dt_model *m)
{
    DT_ASSERT(m->tree_digest && m->n_tensors <= 256);
    const float *ts[256];
    int64_t counts[256];
    for (int i = 0; i < m->n_tensors; i++) ts[i] = m->params[i].w, counts[i] = m->params[i].n;
    const size_t bytes = (size_t)m->n_tensors * DT_DIGEST_BYTES;
    if (!m->digests) m->digests = dt_backend_alloc(m->be, bytes); /* once per model */
    struct dt_policy pol;                                         /* the op obeys no control */
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    const enum dt_status st = dt_tensor_digests(m->be, m->digests, ts, counts, m->n_tensors, &pol);
    DT_ASSERT_MSG(st == DT_OK, "tensor_digests failed");
    return m->digests;
}

void dt_hash_model(uint8_t model_digest[DT_DIGEST_BYTES],
                   uint8_t (*tensor_digests)[DT_DIGEST_BYTES], struct dt_model *m, float *staging)
{
    const char *names[256];
    DT_ASSERT(m->n_tensors <= 256);
    for (int i = 0; i < m->n_tensors; i++) names[i] = m->params[i].name;
    if (m->tree_digest) { /* where the weights are, every tensor in one call */
        const uint8_t *d = dt_hash_model_digests_begin(m);
        dt_backend_download(m->be, tensor_digests, d, (size_t)m->n_tensors * DT_DIGEST_BYTES);
    } else {
        for (int i = 0; i < m->n_tensors; i++) {
            const struct dt_param *p = &m->params[i];
            const float *host = dt_backend_host_view(m->be, p->w);
            if (!host) {
                dt_backend_download(m->be, staging, p->w, (size_t)p->n * sizeof(float));
                host = staging;
            }
            dt_sha256_f32(tensor_digests[i], host, p->n);
        }
    }
    dt_model_digest(model_digest, names, (const uint8_t(*)[DT_DIGEST_BYTES])tensor_digests,
                    m->n_tensors);
}
