/* The tree digest of a tensor (issue 52): a hash computed where the weights are -- leaves in
 * parallel on a GPU or across CPU threads -- with one definition, so a CUDA kernel and
 * OpenSSL on the CPU give the same 32 bytes (docs/outputs.md, "Digests").
 *
 * Over a tensor's canonical bytes (harness/record/hash.h: float32 little-endian), n bytes:
 *   leaves  leaf i = SHA-256(0x00 || bytes [i L, min((i + 1) L, n))), L = DT_TREE_LEAF_BYTES,
 *           for i in [0, max(1, ceil(n / L))): an empty tensor has one empty leaf;
 *   nodes   while a level holds more than one digest, node j of the next level =
 *           SHA-256(0x01 || digests [j A, min((j + 1) A, count)) of the level), A =
 *           DT_TREE_ARITY: a fixed-shape A-ary tree, every level parallel;
 *   tensor  SHA-256(0x02 || n as 8 little-endian bytes || the last level's one digest).
 * The tag bytes keep a leaf, a node and a tensor digest from ever hashing the same input;
 * the length binds the tensor's size. The model digest stays the one of hash.h, over
 * (name, tensor digest) pairs.
 *
 * DT_HD, so the device kernels and the host tests call the same functions; the CPU's own
 * path (harness/record/hash.c) computes the same digests with OpenSSL. */
#ifndef DT_TREE_HASH_H
#define DT_TREE_HASH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "core/sha256_hd.h"

/* L and A set the longest chain of SHA-256 blocks one GPU thread hashes in turn -- a leaf's
 * 17, then 5 per level (a node's 8 digests), 38 for a megabyte -- which bounds the digest's
 * latency on a device (results/cpu/cost-model: 4 KiB leaves and 64-ary nodes took 132);
 * the price is ~10% more blocks than a plain SHA-256 of the bytes. */
#define DT_TREE_LEAF_BYTES 1024 /* L */
#define DT_TREE_ARITY 8         /* A: a node hashes 256 bytes of child digests */
#define DT_TREE_TAG_LEAF 0x00
#define DT_TREE_TAG_NODE 0x01
#define DT_TREE_TAG_TENSOR 0x02

/* The number of leaves of an n-byte tensor, and of nodes above `count` digests. */
static inline DT_HD int64_t dt_tree_leaves(uint64_t n)
{
    return n == 0 ? 1 : (int64_t)((n + DT_TREE_LEAF_BYTES - 1) / DT_TREE_LEAF_BYTES);
}
static inline DT_HD int64_t dt_tree_parents(int64_t count)
{
    return (count + DT_TREE_ARITY - 1) / DT_TREE_ARITY;
}

/* Leaf i of the n bytes at data. */
static inline DT_HD void dt_tree_leaf(uint8_t out[32], const uint8_t *data, uint64_t n, int64_t i)
{
    const uint64_t begin = (uint64_t)i * DT_TREE_LEAF_BYTES;
    const uint64_t end = begin + DT_TREE_LEAF_BYTES < n ? begin + DT_TREE_LEAF_BYTES : n;
    const uint8_t tag = DT_TREE_TAG_LEAF;
    struct dt_sha256_hd s;
    dt_sha256_hd_init(&s);
    dt_sha256_hd_update(&s, &tag, 1);
    if (end > begin) dt_sha256_hd_update(&s, data + begin, end - begin);
    dt_sha256_hd_final(&s, out);
}

/* Node j above `count` digests (32 bytes each, back to back). */
static inline DT_HD void dt_tree_node(uint8_t out[32], const uint8_t *level, int64_t count,
                                      int64_t j)
{
    const int64_t first = j * DT_TREE_ARITY;
    const int64_t last = first + DT_TREE_ARITY < count ? first + DT_TREE_ARITY : count;
    const uint8_t tag = DT_TREE_TAG_NODE;
    struct dt_sha256_hd s;
    dt_sha256_hd_init(&s);
    dt_sha256_hd_update(&s, &tag, 1);
    dt_sha256_hd_update(&s, level + first * 32, (uint64_t)(last - first) * 32);
    dt_sha256_hd_final(&s, out);
}

/* The tensor digest from the top of its tree. */
static inline DT_HD void dt_tree_tensor(uint8_t out[32], uint64_t n, const uint8_t top[32])
{
    uint8_t head[9];
    head[0] = DT_TREE_TAG_TENSOR;
    for (int i = 0; i < 8; i++) head[1 + i] = (uint8_t)(n >> (8 * i));
    struct dt_sha256_hd s;
    dt_sha256_hd_init(&s);
    dt_sha256_hd_update(&s, head, 9);
    dt_sha256_hd_update(&s, top, 32);
    dt_sha256_hd_final(&s, out);
}

/* The shape of several tensors' trees, level by level, for the kernels and loops that hash
 * every tensor's level at once: level 0 is the leaves. At level l tensor t has count[l][t]
 * digests from offset off[l][t] of that level's buffer (tensors back to back); the next
 * level has parents(count) nodes for a tensor with more than one digest, else its one digest
 * carried up unchanged (a copy, not a hash); `levels` is the first level where every tensor
 * has one digest, whose off[levels][t] is the tensor's top. A host-side plan. */
#define DT_TREE_MAX_LEVELS 12 /* 1 KiB leaves, arity 8: past 2^46 bytes per tensor */

struct dt_tree_plan {
    int n, levels;
    int64_t *count[DT_TREE_MAX_LEVELS + 1], *off[DT_TREE_MAX_LEVELS + 1]; /* [n + 1] each */
    int64_t *storage;
};

/* count[l][n] and off[l][n] hold the level's total. Returns false when a tensor is too large
 * for DT_TREE_MAX_LEVELS (never below 2^46 bytes). */
static inline bool dt_tree_plan_make(struct dt_tree_plan *p, const uint64_t *bytes, int n,
                                     int64_t *storage /* 2 (DT_TREE_MAX_LEVELS + 1) (n + 1) */)
{
    p->n = n;
    p->storage = storage;
    for (int l = 0; l <= DT_TREE_MAX_LEVELS; l++) {
        p->count[l] = storage + (2 * l) * (n + 1);
        p->off[l] = storage + (2 * l + 1) * (n + 1);
    }
    bool more = true;
    int l = 0;
    for (;; l++) {
        int64_t total = 0;
        more = false;
        for (int t = 0; t < n; t++) {
            const int64_t c =
                l == 0 ? dt_tree_leaves(bytes[t])
                       : (p->count[l - 1][t] > 1 ? dt_tree_parents(p->count[l - 1][t]) : 1);
            p->count[l][t] = c;
            p->off[l][t] = total;
            total += c;
            more = more || c > 1;
        }
        p->count[l][n] = p->off[l][n] = total;
        if (!more) break;
        if (l == DT_TREE_MAX_LEVELS) return false;
    }
    p->levels = l;
    return true;
}

/* Level l + 1's digest i (of the plan's level-(l+1) total) from level l's digests `in`:
 * node j of its tensor, or the tensor's one digest carried up. */
static inline DT_HD void dt_tree_step(uint8_t *out, const uint8_t *in, const int64_t *count_l,
                                      const int64_t *off_l, const int64_t *off_next, int n,
                                      int64_t i)
{
    int t = 0;
    while (t + 1 < n && off_next[t + 1] <= i) t++; /* few tensors: a linear scan */
    const int64_t j = i - off_next[t];
    if (count_l[t] == 1) {
        for (int b = 0; b < 32; b++) out[i * 32 + b] = in[off_l[t] * 32 + b];
        return;
    }
    dt_tree_node(out + i * 32, in + off_l[t] * 32, count_l[t], j);
}

#endif
