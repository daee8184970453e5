/* SHA-256 (FIPS 180-4) as DT_HD functions, for the CUDA kernels that hash weights where
 * they are (core/tree_hash.h) and the host tests that emulate them: the same
 * function on both sides, checked against OpenSSL's digest (tests/test_tree_hash.c). The
 * CPU's own hashing stays OpenSSL's (SHA-NI where the CPU has it): the digests are the
 * same by definition, and the tests hold the two to it.
 *
 * Streaming: dt_sha256_hd_init, _update (any number of bytes), _final. */
#ifndef DT_SHA256_HD_H
#define DT_SHA256_HD_H

#include <stdint.h>

#include "core/hd.h"

struct dt_sha256_hd {
    uint32_t h[8];
    uint8_t buf[64];
    uint64_t bytes; /* total so far */
    int fill;       /* bytes in buf */
};

static inline DT_HD uint32_t dt_sha256_rotr_(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* One 64-byte block into the state. */
static inline DT_HD void dt_sha256_block_(uint32_t h[8], const uint8_t *p)
{
    const uint32_t k[64] = {
        0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
        0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
        0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
        0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
        0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
        0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
        0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
        0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
        0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
        0xc67178f2u};
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 =
            dt_sha256_rotr_(w[i - 15], 7) ^ dt_sha256_rotr_(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 =
            dt_sha256_rotr_(w[i - 2], 17) ^ dt_sha256_rotr_(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        const uint32_t S1 = dt_sha256_rotr_(e, 6) ^ dt_sha256_rotr_(e, 11) ^ dt_sha256_rotr_(e, 25);
        const uint32_t ch = (e & f) ^ (~e & g);
        const uint32_t t1 = hh + S1 + ch + k[i] + w[i];
        const uint32_t S0 = dt_sha256_rotr_(a, 2) ^ dt_sha256_rotr_(a, 13) ^ dt_sha256_rotr_(a, 22);
        const uint32_t mj = (a & b) ^ (a & c) ^ (b & c);
        const uint32_t t2 = S0 + mj;
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

static inline DT_HD void dt_sha256_hd_init(struct dt_sha256_hd *s)
{
    const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                            0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    for (int i = 0; i < 8; i++) s->h[i] = iv[i];
    s->bytes = 0;
    s->fill = 0;
}

static inline DT_HD void dt_sha256_hd_update(struct dt_sha256_hd *s, const void *data, uint64_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    s->bytes += n;
    while (n > 0) {
        if (s->fill == 0 && n >= 64) { /* whole blocks straight from the input */
            dt_sha256_block_(s->h, p);
            p += 64, n -= 64;
            continue;
        }
        const uint64_t take = 64 - (uint64_t)s->fill < n ? 64 - (uint64_t)s->fill : n;
        for (uint64_t i = 0; i < take; i++) s->buf[s->fill + (int)i] = p[i];
        s->fill += (int)take, p += take, n -= take;
        if (s->fill == 64) {
            dt_sha256_block_(s->h, s->buf);
            s->fill = 0;
        }
    }
}

static inline DT_HD void dt_sha256_hd_final(struct dt_sha256_hd *s, uint8_t out[32])
{
    const uint64_t bits = s->bytes * 8;
    s->buf[s->fill++] = 0x80;
    if (s->fill > 56) {
        while (s->fill < 64) s->buf[s->fill++] = 0;
        dt_sha256_block_(s->h, s->buf);
        s->fill = 0;
    }
    while (s->fill < 56) s->buf[s->fill++] = 0;
    for (int i = 0; i < 8; i++) s->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    dt_sha256_block_(s->h, s->buf);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

#endif
