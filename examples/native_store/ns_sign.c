/* Handle signatures in C: HMAC-SHA256(secret, sha256(key) || address LE64 || id LE32),
 * the seed's documented form, with the secret read from the segment at each
 * call (clear() replaces it, and every older handle is then refused).
 * SHA-256 is FIPS 180-4, written here so that nothing is linked but libc;
 * tests/examples/test_native_store.py compares it with hashlib and hmac.
 * Compiled in ns_ring.c's translation unit (build.py), after ns_ring.h. */
#include <stdint.h>
#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void compress_portable(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ w[i - 15] >> 3;
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ w[i - 2] >> 10;
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* One block with the CPU's SHA extensions (x86 SHA-NI): the state kept as
 * ABEF/CDGH, four rounds per message group, as the instructions want it. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8],
                                                                      const uint8_t *p) {
    const __m128i byteswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[16];
    for (int g = 0; g < 4; g++)
        w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), byteswap);
    for (int g = 4; g < 16; g++)
        w[g] = _mm_sha256msg2_epu32(
            _mm_add_epi32(_mm_sha256msg1_epu32(w[g - 4], w[g - 3]),
                          _mm_alignr_epi8(w[g - 1], w[g - 2], 4)),
            w[g - 1]);
    for (int g = 0; g < 16; g++) {
        __m128i msg = _mm_add_epi32(w[g], _mm_loadu_si128((const __m128i *)&K[4 * g]));
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(msg, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

static int cpu_has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 29) & 1;
}
#else
static void compress_ni(uint32_t h[8], const uint8_t *p) { compress_portable(h, p); }
static int cpu_has_sha_ni(void) { return 0; }
#endif

static int use_ni = -1; /* -1: not decided yet */

/* Use the SHA extensions if `wanted` and the CPU has them; returns whether
 * they are used (tests check both paths against hashlib). */
int ns_sha_ni(int wanted) {
    use_ni = wanted && cpu_has_sha_ni();
    return use_ni;
}

static void compress(uint32_t h[8], const uint8_t *p) {
    if (use_ni < 0) use_ni = cpu_has_sha_ni();
    if (use_ni)
        compress_ni(h, p);
    else
        compress_portable(h, p);
}

static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

/* The digest of `prefix_blocks` 64-byte blocks already compressed into `h`,
 * followed by `n` more bytes (the message's tail, padding added here). */
static void finish(uint32_t h[8], uint64_t prefix_blocks, const uint8_t *p, uint64_t n,
                   uint8_t out[32]) {
    uint64_t bits = (prefix_blocks * 64 + n) * 8;
    for (; n >= 64; p += 64, n -= 64) compress(h, p);
    uint8_t tail[128] = {0};
    memcpy(tail, p, n);
    tail[n] = 0x80;
    uint64_t blocks = n + 9 > 64 ? 2 : 1;
    for (int i = 0; i < 8; i++) tail[64 * blocks - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (uint64_t i = 0; i < blocks; i++) compress(h, tail + 64 * i);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

void ns_sha256(const char *data, uint64_t n, uint8_t *out) {
    uint32_t h[8];
    memcpy(h, H0, sizeof h);
    finish(h, 0, (const uint8_t *)data, n, out);
}

/* HMAC-SHA256 with a 32-byte key: the key's inner and outer states (one
 * block each) are kept in the ring and recomputed only when the segment's
 * secret changes (clear()). */
static void hmac32(ns_ring *r, const uint8_t key[32], const uint8_t *msg, uint64_t n,
                   uint8_t out[32]) {
    if (!r->hmac_ready || memcmp(r->hmac_key, key, 32) != 0) {
        uint8_t pad[64];
        memcpy(r->hmac_inner, H0, sizeof H0);
        memcpy(r->hmac_outer, H0, sizeof H0);
        memset(pad, 0x36, sizeof pad);
        for (int i = 0; i < 32; i++) pad[i] ^= key[i];
        compress(r->hmac_inner, pad);
        memset(pad, 0x5c, sizeof pad);
        for (int i = 0; i < 32; i++) pad[i] ^= key[i];
        compress(r->hmac_outer, pad);
        memcpy(r->hmac_key, key, 32);
        r->hmac_ready = 1;
    }
    uint32_t h[8];
    uint8_t inner[32];
    memcpy(h, r->hmac_inner, sizeof h);
    finish(h, 1, msg, n, inner);
    memcpy(h, r->hmac_outer, sizeof h);
    finish(h, 1, inner, 32, out);
}

int ns_sign(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
            uint8_t *out) {
    uint8_t secret[NS_SECRET], msg[44];
    int rc = ns_secret(r, secret);
    if (rc) return rc;
    ns_sha256(key, key_len, msg);
    for (int i = 0; i < 8; i++) msg[32 + i] = (uint8_t)(address >> (8 * i));
    for (int i = 0; i < 4; i++) msg[40 + i] = (uint8_t)(id >> (8 * i));
    hmac32(r, secret, msg, sizeof msg, out);
    return NS_OK;
}

int ns_verify(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
              const char *signature) {
    uint8_t expected[32], diff = 0;
    int rc = ns_sign(r, key, key_len, address, id, expected);
    if (rc) return rc;
    for (int i = 0; i < 32; i++) diff |= expected[i] ^ (uint8_t)signature[i]; /* constant time */
    return diff ? NS_E_SIGNATURE : NS_OK;
}

/* put's C half and the new handle's signature in one call: vLLM's writer
 * signs every handle it puts, and one call instead of two is most of what
 * get_signature costs (the glue caches the signature for it). A failed put
 * signs nothing; signing after a put cannot fail (the ring is open). */
int ns_put_signed(ns_ring *r, uint64_t size, const char *md, uint64_t md_len, const char *data,
                  uint64_t data_len, const char *key, uint64_t key_len, uint64_t *address,
                  uint32_t *id, uint8_t *signature) {
    int rc = ns_put(r, size, md, md_len, data, data_len, address, id);
    return rc ? rc : ns_sign(r, key, key_len, *address, *id, signature);
}
