/* The tree digest (core/tree_hash.h) on the host through OpenSSL: the same digests as the
 * header's DT_HD functions, faster on the CPU (SHA-NI). */
#ifndef DT_TREE_HASH_HOST_H
#define DT_TREE_HASH_HOST_H

#include <stdint.h>

#include "core/tree_hash.h"

/* OpenSSL's SHA-256, fetched once per process (thread-safe): every host SHA-256 inits with
 * it (the tree's nodes here, harness/record/hash.c's flat digests). */
struct evp_md_st;
const struct evp_md_st *dt_sha256_md(void);

/* Leaves [first, last) of one tensor's n bytes at data, into out (32 bytes each). */
void dt_tree_leaves_host(uint8_t *out, const void *data, uint64_t bytes, int64_t first,
                         int64_t last);

/* The levels above a plan's leaves (in a, its level-0 buffer; b: scratch of the same size;
 * both overwritten) and the tensors' digests into digests (p->n x 32 bytes). */
void dt_tree_finish_host(uint8_t *digests, const struct dt_tree_plan *p, const uint64_t *bytes,
                         uint8_t *a, uint8_t *b);

/* One tensor's tree digest, on the calling thread. */
void dt_tree_digest_host(uint8_t out[32], const void *data, uint64_t bytes);

#endif
