/* Hashing: SHA-256 against the published FIPS 180-2 / NIST test vectors; the canonical
 * float encoding; the model digest's definition, stability and sensitivity to one bit. */
#include <stdint.h>

#include "harness/record/hash.h"
#include "tests/check.h"

static void hex_of(char out[DT_DIGEST_HEX], const void *data, size_t n)
{
    uint8_t d[DT_DIGEST_BYTES];
    dt_sha256(d, data, n);
    dt_digest_hex(out, d);
}

/* FIPS 180-2 appendix B vectors and the empty string. */
DT_TEST(sha256_vectors)
{
    char h[DT_DIGEST_HEX];
    hex_of(h, "", 0);
    CHECK_STR_EQ(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of(h, "abc", 3);
    CHECK_STR_EQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(h, m2, strlen(m2));
    CHECK_STR_EQ(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    hex_of(h, million, 1000000);
    free(million);
    CHECK_STR_EQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Floats are hashed as little-endian IEEE-754 binary32: 1.0f is 00 00 80 3f. */
DT_TEST(canonical_float_bytes)
{
    const float v[3] = {1.0f, -0.0f, 0x1p-149f};
    const uint8_t bytes[12] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00,
                               0x00, 0x80, 0x01, 0x00, 0x00, 0x00};
    uint8_t a[DT_DIGEST_BYTES], b[DT_DIGEST_BYTES];
    dt_sha256_f32(a, v, 3);
    dt_sha256(b, bytes, sizeof bytes);
    CHECK(memcmp(a, b, DT_DIGEST_BYTES) == 0);
    /* +0.0 and -0.0 are different bits and must hash differently. */
    const float pz = 0.0f, nz = -0.0f;
    dt_sha256_f32(a, &pz, 1);
    dt_sha256_f32(b, &nz, 1);
    CHECK(memcmp(a, b, DT_DIGEST_BYTES) != 0);
}

/* A small model's tensors, deterministic content. */
#define NT 3
static float t0[12], t1[5], t2[7];
static const char *names[NT] = {"dense0.weight", "dense0.bias", "dense1.weight"};

static void fill_tensors(void)
{
    for (int i = 0; i < 12; i++) t0[i] = 0.125f * (float)i - 0.7f;
    for (int i = 0; i < 5; i++) t1[i] = (float)i * 1e-3f;
    for (int i = 0; i < 7; i++) t2[i] = -3.0f + (float)i;
}

static void model_digest(uint8_t out[DT_DIGEST_BYTES], uint8_t td[NT][DT_DIGEST_BYTES])
{
    dt_sha256_f32(td[0], t0, 12);
    dt_sha256_f32(td[1], t1, 5);
    dt_sha256_f32(td[2], t2, 7);
    dt_model_digest(out, names, (const uint8_t(*)[DT_DIGEST_BYTES])td, NT);
}

/* The model digest is SHA-256 over name || 0x00 || tensor digest, in order. */
DT_TEST(model_digest_definition)
{
    fill_tensors();
    uint8_t md[DT_DIGEST_BYTES], td[NT][DT_DIGEST_BYTES];
    model_digest(md, td);
    uint8_t buf[512];
    size_t n = 0;
    for (int i = 0; i < NT; i++) {
        memcpy(buf + n, names[i], strlen(names[i]));
        n += strlen(names[i]);
        buf[n++] = 0;
        memcpy(buf + n, td[i], DT_DIGEST_BYTES);
        n += DT_DIGEST_BYTES;
    }
    uint8_t ref[DT_DIGEST_BYTES];
    dt_sha256(ref, buf, n);
    CHECK(memcmp(md, ref, DT_DIGEST_BYTES) == 0);
}

DT_TEST(model_digest_stable)
{
    fill_tensors();
    uint8_t a[DT_DIGEST_BYTES], b[DT_DIGEST_BYTES], td[NT][DT_DIGEST_BYTES];
    model_digest(a, td);
    model_digest(b, td);
    CHECK(memcmp(a, b, DT_DIGEST_BYTES) == 0);
}

/* Flipping any single bit of any one weight changes that tensor's digest and the model
 * digest, and leaves the other tensors' digests alone. */
DT_TEST(model_digest_bit_flip)
{
    fill_tensors();
    uint8_t base[DT_DIGEST_BYTES], base_td[NT][DT_DIGEST_BYTES];
    model_digest(base, base_td);
    int flips = 0;
    for (int e = 0; e < 12; e++) {
        for (int bit = 0; bit < 32; bit++) {
            uint32_t u;
            memcpy(&u, &t0[e], 4);
            u ^= 1u << bit;
            memcpy(&t0[e], &u, 4);
            uint8_t md[DT_DIGEST_BYTES], td[NT][DT_DIGEST_BYTES];
            model_digest(md, td);
            CHECK(memcmp(md, base, DT_DIGEST_BYTES) != 0);
            CHECK(memcmp(td[0], base_td[0], DT_DIGEST_BYTES) != 0);
            CHECK(memcmp(td[1], base_td[1], DT_DIGEST_BYTES) == 0);
            CHECK(memcmp(td[2], base_td[2], DT_DIGEST_BYTES) == 0);
            u ^= 1u << bit;
            memcpy(&t0[e], &u, 4);
            flips++;
        }
    }
    CHECK_INT_EQ(flips, 12 * 32);
    uint8_t again[DT_DIGEST_BYTES], td[NT][DT_DIGEST_BYTES];
    model_digest(again, td);
    CHECK(memcmp(again, base, DT_DIGEST_BYTES) == 0);
}

/* Renaming or reordering tensors changes the model digest. */
DT_TEST(model_digest_names_and_order)
{
    fill_tensors();
    uint8_t base[DT_DIGEST_BYTES], td[NT][DT_DIGEST_BYTES], md[DT_DIGEST_BYTES];
    model_digest(base, td);
    const char *renamed[NT] = {"dense0.weight", "dense0.biaz", "dense1.weight"};
    dt_model_digest(md, renamed, (const uint8_t(*)[DT_DIGEST_BYTES])td, NT);
    CHECK(memcmp(md, base, DT_DIGEST_BYTES) != 0);
    uint8_t swapped[NT][DT_DIGEST_BYTES];
    memcpy(swapped[0], td[1], DT_DIGEST_BYTES);
    memcpy(swapped[1], td[0], DT_DIGEST_BYTES);
    memcpy(swapped[2], td[2], DT_DIGEST_BYTES);
    const char *swapped_names[NT] = {"dense0.bias", "dense0.weight", "dense1.weight"};
    dt_model_digest(md, swapped_names, (const uint8_t(*)[DT_DIGEST_BYTES])swapped, NT);
    CHECK(memcmp(md, base, DT_DIGEST_BYTES) != 0);
}

DT_TEST_MAIN(DT_CASE(sha256_vectors), DT_CASE(canonical_float_bytes),
             DT_CASE(model_digest_definition), DT_CASE(model_digest_stable),
             DT_CASE(model_digest_bit_flip), DT_CASE(model_digest_names_and_order))
