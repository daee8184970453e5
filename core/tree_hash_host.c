/* The tree digest on the host through OpenSSL's SHA-256 (core/tree_hash.h defines it; the
 * DT_HD functions there are what the CUDA kernels run, and tests/test_tree_hash.c holds the
 * two to each other): the CPU backend's op tensor_digests (nets/cpu/digest.c, leaves across
 * its pool) and the hashing pipeline's host path (harness/run/hashpipe.c) call these. */
#include "core/tree_hash_host.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

#include "core/status.h"
#include "core/util.h"

/* SHA-256 fetched once: EVP_sha256() in each init fetches it again through a lock of the
 * library's (a few percent of a step's hashing, two workers contending). Never freed. */
static EVP_MD *sha256_md;
static void fetch_sha256(void) { sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL); }
const EVP_MD *dt_sha256_md(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fetch_sha256);
    DT_ASSERT_MSG(sha256_md != NULL, "SHA-256 is not available from OpenSSL");
    return sha256_md;
}

/* SHA-256(tag || head || data) into out on a reused context (head may be NULL). */
static void sha256_tagged(EVP_MD_CTX *ctx, uint8_t out[32], uint8_t tag, const void *head,
                          size_t head_n, const void *data, size_t n)
{
    unsigned len = 0;
    DT_ASSERT_MSG(EVP_DigestInit_ex(ctx, dt_sha256_md(), NULL) == 1 &&
                      EVP_DigestUpdate(ctx, &tag, 1) == 1 &&
                      (head_n == 0 || EVP_DigestUpdate(ctx, head, head_n) == 1) &&
                      (n == 0 || EVP_DigestUpdate(ctx, data, n) == 1) &&
                      EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == 32,
                  "SHA-256 failed");
}

static EVP_MD_CTX *new_ctx(void)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    DT_ASSERT_MSG(ctx != NULL, "EVP_MD_CTX_new failed");
    return ctx;
}

void dt_tree_leaves_host(uint8_t *out, const void *data, uint64_t bytes, int64_t first,
                         int64_t last)
{
    EVP_MD_CTX *ctx = new_ctx();
    for (int64_t i = first; i < last; i++) {
        const uint64_t begin = (uint64_t)i * DT_TREE_LEAF_BYTES;
        const uint64_t n = bytes - begin < DT_TREE_LEAF_BYTES ? bytes - begin : DT_TREE_LEAF_BYTES;
        sha256_tagged(ctx, out + (i - first) * 32, DT_TREE_TAG_LEAF, NULL, 0,
                      bytes == 0 ? NULL : (const uint8_t *)data + begin, bytes == 0 ? 0 : n);
    }
    EVP_MD_CTX_free(ctx);
}

void dt_tree_finish_host(uint8_t *digests, const struct dt_tree_plan *p, const uint64_t *bytes,
                         uint8_t *a, uint8_t *b)
{
    EVP_MD_CTX *ctx = new_ctx();
    for (int l = 0; l < p->levels; l++) { /* a's level l -> b's level l + 1 */
        for (int t = 0; t < p->n; t++) {
            const int64_t c = p->count[l][t], o = p->off[l][t], o2 = p->off[l + 1][t];
            if (c == 1) {
                memcpy(b + o2 * 32, a + o * 32, 32);
                continue;
            }
            for (int64_t q = 0; q < p->count[l + 1][t]; q++) {
                const int64_t first = q * DT_TREE_ARITY;
                const int64_t k = c - first < DT_TREE_ARITY ? c - first : DT_TREE_ARITY;
                sha256_tagged(ctx, b + (o2 + q) * 32, DT_TREE_TAG_NODE, NULL, 0,
                              a + (o + first) * 32, (size_t)k * 32);
            }
        }
        uint8_t *swap = a;
        a = b, b = swap;
    }
    for (int t = 0; t < p->n; t++) {
        uint8_t len[8];
        for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bytes[t] >> (8 * i));
        sha256_tagged(ctx, digests + (size_t)t * 32, DT_TREE_TAG_TENSOR, len, 8,
                      a + p->off[p->levels][t] * 32, 32);
    }
    EVP_MD_CTX_free(ctx);
}

void dt_tree_digest_host(uint8_t out[32], const void *data, uint64_t bytes)
{
    int64_t storage[2 * (DT_TREE_MAX_LEVELS + 1) * 2];
    struct dt_tree_plan p;
    DT_ASSERT_MSG(dt_tree_plan_make(&p, &bytes, 1, storage), "a tensor too large to digest");
    const int64_t leaves = p.count[0][1];
    uint8_t *a = dt_xmalloc((size_t)leaves * 32), *b = dt_xmalloc((size_t)leaves * 32);
    dt_tree_leaves_host(a, data, bytes, 0, leaves);
    dt_tree_finish_host(out, &p, &bytes, a, b);
    free(a), free(b);
}
