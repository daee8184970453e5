/* The tensors' tree digests on the CPU backend (core/tree_hash.h): the leaves across the
 * thread pool, each through OpenSSL's SHA-256 (SHA-NI where the CPU has it), then the
 * levels and the tensor digests on the calling thread -- the digests the CUDA kernels give
 * from the header's own SHA-256 (tests/test_tree_hash.c holds the two to each other). */
#include <openssl/evp.h>
#include <stdlib.h>

#include "core/tree_hash.h"
#include "core/util.h"
#include "nets/cpu/cpu.h"

struct digest_job {
    const float *const *tensors;
    const uint64_t *bytes;
    const struct dt_tree_plan *plan;
    uint8_t *leaves; /* level 0: total x 32 bytes */
};

/* SHA-256 of tag || data (n bytes) into out, on a reused context. */
static void sha256_tagged(EVP_MD_CTX *ctx, uint8_t out[32], uint8_t tag, const void *data,
                          size_t n)
{
    unsigned len = 0;
    DT_ASSERT_MSG(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
                      EVP_DigestUpdate(ctx, &tag, 1) == 1 &&
                      (n == 0 || EVP_DigestUpdate(ctx, data, n) == 1) &&
                      EVP_DigestFinal_ex(ctx, out, &len) == 1 && len == 32,
                  "SHA-256 failed");
}

/* Leaves [begin, end) of every tensor's level 0. */
static void leaves_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct digest_job *j = ctx;
    const struct dt_tree_plan *p = j->plan;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    DT_ASSERT_MSG(md != NULL, "EVP_MD_CTX_new failed");
    int t = 0;
    for (int64_t i = begin; i < end; i++) {
        while (t + 1 < p->n && p->off[0][t + 1] <= i) t++;
        const uint64_t first = (uint64_t)(i - p->off[0][t]) * DT_TREE_LEAF_BYTES;
        const uint64_t n = j->bytes[t] - first < DT_TREE_LEAF_BYTES ? j->bytes[t] - first
                                                                    : DT_TREE_LEAF_BYTES;
        sha256_tagged(md, j->leaves + i * 32, DT_TREE_TAG_LEAF,
                      (const uint8_t *)j->tensors[t] + first, j->bytes[t] == 0 ? 0 : n);
    }
    EVP_MD_CTX_free(md);
}

/* portable: a fixed function of the tensors' bytes at every policy and thread count. */
enum dt_status dt_cpu_tensor_digests(struct dt_backend *be, uint8_t *digests,
                                     const float *const *tensors, const int64_t *counts, int n,
                                     const struct dt_policy *pol)
{
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the canonical bytes are the in-memory ones on little-endian hosts only"
#endif
    uint64_t *bytes = dt_xmalloc((size_t)n * sizeof *bytes);
    for (int t = 0; t < n; t++) bytes[t] = (uint64_t)counts[t] * 4;
    int64_t *storage = dt_xmalloc((size_t)(2 * (DT_TREE_MAX_LEVELS + 1) * (n + 1)) * 8);
    struct dt_tree_plan plan;
    if (!dt_tree_plan_make(&plan, bytes, n, storage)) {
        free(bytes), free(storage);
        return dt_backend_op_error(be, DT_ERR_UNSUPPORTED, "a tensor too large for the tree digest");
    }
    const int64_t total = plan.count[0][n];
    uint8_t *a = dt_xmalloc((size_t)total * 32), *b = dt_xmalloc((size_t)total * 32);
    struct digest_job j = {.tensors = tensors, .bytes = bytes, .plan = &plan, .leaves = a};
    dt_pool_run(dt_cpu(be)->pool, total, 4, leaves_part, &j);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    DT_ASSERT_MSG(md != NULL, "EVP_MD_CTX_new failed");
    for (int l = 0; l < plan.levels; l++) { /* a's level l -> b's level l + 1 */
        for (int t = 0; t < n; t++) {
            const int64_t c = plan.count[l][t], o = plan.off[l][t], o2 = plan.off[l + 1][t];
            if (c == 1) {
                memcpy(b + o2 * 32, a + o * 32, 32);
                continue;
            }
            for (int64_t q = 0; q < plan.count[l + 1][t]; q++) {
                const int64_t first = q * DT_TREE_ARITY;
                const int64_t k = c - first < DT_TREE_ARITY ? c - first : DT_TREE_ARITY;
                sha256_tagged(md, b + (o2 + q) * 32, DT_TREE_TAG_NODE, a + (o + first) * 32,
                              (size_t)k * 32);
            }
        }
        uint8_t *swap = a;
        a = b, b = swap;
    }
    for (int t = 0; t < n; t++) {
        uint8_t head[8 + 32];
        for (int i = 0; i < 8; i++) head[i] = (uint8_t)(bytes[t] >> (8 * i));
        memcpy(head + 8, a + plan.off[plan.levels][t] * 32, 32);
        sha256_tagged(md, digests + (size_t)t * 32, DT_TREE_TAG_TENSOR, head, sizeof head);
    }
    EVP_MD_CTX_free(md);
    free(a), free(b), free(bytes), free(storage);
    return DT_OK;
}
