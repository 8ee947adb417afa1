/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), libc only: the verbs layer is preloaded into
 * MPI processes and may link neither GLib nor OpenSSL, and neither libc nor rdma-core offers a
 * public hash. Checked against FIPS 180-2's and RFC 4231's test vectors (verbs-auth-test). */
#include "hv-auth.h"

#include <string.h>

static const uint32_t hv_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

#define HV_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void hv_sha256_block(HvSha256 *s, const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, h;

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = HV_ROR(w[i - 15], 7) ^ HV_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = HV_ROR(w[i - 2], 17) ^ HV_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (HV_ROR(e, 6) ^ HV_ROR(e, 11) ^ HV_ROR(e, 25)) + ((e & f) ^ (~e & g)) +
                      hv_sha256_k[i] + w[i];
        uint32_t t2 = (HV_ROR(a, 2) ^ HV_ROR(a, 13) ^ HV_ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1;
        d = c, c = b, b = a, a = t1 + t2;
    }
    s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
    s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

void hv_sha256_init(HvSha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

    memcpy(s->h, h0, sizeof(h0));
    s->len = 0;
    s->n = 0;
}

void hv_sha256_update(HvSha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;

    s->len += len;
    if (s->n) {
        size_t take = len < 64 - s->n ? len : 64 - s->n;

        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        len -= take;
        if (s->n < 64)
            return;
        hv_sha256_block(s, s->buf);
        s->n = 0;
    }
    for (; len >= 64; p += 64, len -= 64)
        hv_sha256_block(s, p);
    memcpy(s->buf, p, len);
    s->n = len;
}

void hv_sha256_final(HvSha256 *s, uint8_t out[HV_SHA256_LEN])
{
    uint64_t bits = s->len * 8;
    uint8_t pad[72] = {0x80};
    size_t npad = (s->n < 56 ? 56 : 120) - s->n;

    for (int i = 0; i < 8; i++)
        pad[npad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    hv_sha256_update(s, pad, npad + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
    memset(s, 0, sizeof(*s));
}

void hv_hmac_init(HvHmac *h, const void *key, size_t key_len)
{
    uint8_t k[64] = {0}, pad[64];

    if (key_len > 64) {
        hv_sha256_init(&h->inner);
        hv_sha256_update(&h->inner, key, key_len);
        hv_sha256_final(&h->inner, k);
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    hv_sha256_init(&h->inner);
    hv_sha256_update(&h->inner, pad, 64);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    hv_sha256_init(&h->outer);
    hv_sha256_update(&h->outer, pad, 64);
    memset(k, 0, sizeof(k));
    memset(pad, 0, sizeof(pad));
}

void hv_hmac_update(HvHmac *h, const void *data, size_t len)
{
    hv_sha256_update(&h->inner, data, len);
}

void hv_hmac_final(HvHmac *h, uint8_t out[HV_SHA256_LEN])
{
    uint8_t ih[HV_SHA256_LEN];

    hv_sha256_final(&h->inner, ih);
    hv_sha256_update(&h->outer, ih, sizeof(ih));
    hv_sha256_final(&h->outer, out);
    memset(ih, 0, sizeof(ih));
}

int hv_mac_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    volatile uint8_t d = 0;

    for (size_t i = 0; i < n; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}
