/* Weight hashing: SHA-256 (OpenSSL EVP) of each parameter tensor's canonical bytes and
 * a model digest over (tensor name, tensor digest) pairs in model order.
 * Data path (docs/DESIGN.md): harness/train -> harness/hash -> harness/trace.
 *
 * Canonical bytes: the tensor's float32 values, row-major in the model's documented
 * layout, each as 4 little-endian bytes (IEEE-754 binary32 bit pattern, -0.0 and NaN
 * payloads kept as they are). Model digest: SHA-256 over, for each tensor in order, the
 * name's bytes, one 0x00 byte, then the tensor's 32-byte digest. */
#ifndef DT_HASH_H
#define DT_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "nets/model.h"

#define DT_DIGEST_BYTES 32
#define DT_DIGEST_HEX 65 /* 64 hex characters + NUL */

/* SHA-256 of raw bytes. Aborts if OpenSSL fails (no digest is better than a wrong one). */
void dt_sha256(uint8_t out[DT_DIGEST_BYTES], const void *data, size_t bytes);

/* SHA-256 of n float32 values in canonical little-endian byte order. */
void dt_sha256_f32(uint8_t out[DT_DIGEST_BYTES], const float *v, int64_t n);

/* Model digest over named tensor digests, in the given order. */
void dt_model_digest(uint8_t out[DT_DIGEST_BYTES], const char *const *names,
                     const uint8_t (*digests)[DT_DIGEST_BYTES], int n);

void dt_digest_hex(char out[DT_DIGEST_HEX], const uint8_t d[DT_DIGEST_BYTES]);

/* One tensor's digest of the kind the model is hashed with (m->tree_digest: the tree digest
 * of core/tree_hash.h on this thread, else SHA-256), from host memory. */
void dt_tensor_digest_host(uint8_t out[DT_DIGEST_BYTES], const float *v, int64_t n, bool tree);

/* Hash every parameter of m: per-tensor digests into `tensor_digests` (n_params x 32
 * bytes) and the model digest -- the trace's digest of a step. SHA-256 (m->tree_digest
 * false) downloads each tensor into `staging` (as large as the largest) when the backend's
 * memory is not host memory; the tree digest is the backend op tensor_digests, where the
 * weights are: only the digests are read back. */
/* The tree digests of every parameter (m->tree_digest), launched where the weights are: the
 * op tensor_digests into m->digests (backend memory, n_params x 32 bytes; returned). On a
 * device backend it returns before the kernels ran: read it after them (a download, or an
 * asynchronous copy on the same stream: harness/run/hashpipe.c). */
const uint8_t *dt_hash_model_digests_begin(struct dt_model *m);

void dt_hash_model(uint8_t model_digest[DT_DIGEST_BYTES],
                   uint8_t (*tensor_digests)[DT_DIGEST_BYTES], struct dt_model *m, float *staging);

#endif
