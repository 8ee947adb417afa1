/* The authenticated frame of the verbs peer protocol: its one parser and formatter (hv-auth.h). */
#include "hv-auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define HV_AUTH_LABEL "hotmig-verbs-auth 1"
#define HV_AUTH_ROUTE_LABEL "hotmig-verbs-route 1"

static void hv_hex(char *out, const uint8_t *v, size_t n)
{
    static const char d[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[v[i] >> 4];
        out[2 * i + 1] = d[v[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hv_unhex(const char *s, size_t len, uint8_t *v, size_t n)
{
    if (len != 2 * n)
        return -1;
    for (size_t i = 0; i < 2 * n; i++) {
        char c = s[i];
        int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

        if (x < 0)
            return -1;
        if (i % 2)
            v[i / 2] |= (uint8_t)x;
        else
            v[i / 2] = (uint8_t)(x << 4);
    }
    return 0;
}

/* The next field up to a space (which must follow): its start and length; -1 when empty. */
static int hv_field(const char **p, const char *end, const char **s, size_t *n)
{
    const char *q = memchr(*p, ' ', (size_t)(end - *p));

    if (!q || q == *p)
        return -1;
    *s = *p;
    *n = (size_t)(q - *p);
    *p = q + 1;
    return 0;
}

int hv_auth_challenge_format(const uint8_t nonce[HV_AUTH_NONCE_LEN], char *buf, size_t size)
{
    char hex[2 * HV_AUTH_NONCE_LEN + 1];
    int n;

    hv_hex(hex, nonce, HV_AUTH_NONCE_LEN);
    n = snprintf(buf, size, "CHALLENGE %s\n", hex);
    return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

int hv_auth_challenge_parse(const char *line, size_t len, uint8_t nonce[HV_AUTH_NONCE_LEN])
{
    static const char verb[] = "CHALLENGE ";

    if (!line || len != sizeof(verb) - 1 + 2 * HV_AUTH_NONCE_LEN ||
        memcmp(line, verb, sizeof(verb) - 1) != 0)
        return -EINVAL;
    return hv_unhex(line + sizeof(verb) - 1, 2 * HV_AUTH_NONCE_LEN, nonce, HV_AUTH_NONCE_LEN)
               ? -EINVAL
               : 0;
}

void hv_auth_mac(const uint8_t *key, size_t key_len, const HvAuthSession *s, HvAuthDir dir,
                 uint64_t seq, const uint8_t gid[16], const char *msg, size_t msg_len,
                 uint8_t mac[HV_SHA256_LEN])
{
    HvHmac h;
    uint8_t head[sizeof(HV_AUTH_LABEL) + 1 + 2 * HV_AUTH_NONCE_LEN + 8 + 16 + 4];
    size_t o = 0;

    memcpy(head, HV_AUTH_LABEL, sizeof(HV_AUTH_LABEL)); /* with its NUL */
    o += sizeof(HV_AUTH_LABEL);
    head[o++] = (uint8_t)dir;
    memcpy(head + o, s->nonce_s, HV_AUTH_NONCE_LEN);
    o += HV_AUTH_NONCE_LEN;
    memcpy(head + o, s->nonce_c, HV_AUTH_NONCE_LEN);
    o += HV_AUTH_NONCE_LEN;
    for (int i = 0; i < 8; i++)
        head[o++] = (uint8_t)(seq >> (56 - 8 * i));
    memcpy(head + o, gid, 16);
    o += 16;
    for (int i = 0; i < 4; i++)
        head[o++] = (uint8_t)((uint32_t)msg_len >> (24 - 8 * i));
    hv_hmac_init(&h, key, key_len);
    hv_hmac_update(&h, head, o);
    hv_hmac_update(&h, msg, msg_len);
    hv_hmac_final(&h, mac);
}

void hv_auth_route_tag(const uint8_t *key, size_t key_len, uint32_t vqpn,
                       uint8_t tag[HV_ROUTE_TAG_LEN])
{
    HvHmac h;
    uint8_t mac[HV_SHA256_LEN], q[4] = {(uint8_t)(vqpn >> 24), (uint8_t)(vqpn >> 16),
                                        (uint8_t)(vqpn >> 8), (uint8_t)vqpn};

    hv_hmac_init(&h, key, key_len);
    hv_hmac_update(&h, HV_AUTH_ROUTE_LABEL, sizeof(HV_AUTH_ROUTE_LABEL)); /* with its NUL */
    hv_hmac_update(&h, q, sizeof(q));
    hv_hmac_final(&h, mac);
    memcpy(tag, mac, HV_ROUTE_TAG_LEN);
}

int hv_auth_seal(const uint8_t *key, size_t key_len, const HvAuthSession *s, HvAuthDir dir,
                 uint64_t seq, const uint8_t gid[16], const char *msg, size_t msg_len, char *buf,
                 size_t size)
{
    char nonce[2 * HV_AUTH_NONCE_LEN + 1], g[33], m[2 * HV_SHA256_LEN + 1];
    uint8_t mac[HV_SHA256_LEN];
    int n;

    if (msg_len == 0 || msg_len > HV_PROTO_LINE_MAX || memchr(msg, '\n', msg_len))
        return -EINVAL;
    hv_auth_mac(key, key_len, s, dir, seq, gid, msg, msg_len, mac);
    hv_hex(nonce, s->nonce_c, HV_AUTH_NONCE_LEN);
    hv_hex(g, gid, 16);
    hv_hex(m, mac, HV_SHA256_LEN);
    n = snprintf(buf, size, "AUTH %s %llu %s %s %.*s\n", nonce, (unsigned long long)seq, g, m,
                 (int)msg_len, msg);
    return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

int hv_auth_frame_parse(const char *line, size_t len, HvAuthFrame *f)
{
    const char *p = line, *end = line + len, *s;
    size_t n;
    uint64_t seq = 0;

    memset(f, 0, sizeof(*f));
    if (!line || len < 5 || len > HV_AUTH_LINE_MAX || memcmp(line, "AUTH ", 5) != 0 ||
        memchr(line, '\n', len) || memchr(line, '\0', len))
        return -EINVAL;
    p += 5;
    if (hv_field(&p, end, &s, &n) || hv_unhex(s, n, f->nonce, HV_AUTH_NONCE_LEN))
        return -EINVAL;
    if (hv_field(&p, end, &s, &n) || n > 20 || (n > 1 && s[0] == '0'))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || seq > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return -EINVAL;
        seq = seq * 10 + (uint64_t)(s[i] - '0');
    }
    f->seq = seq;
    if (hv_field(&p, end, &s, &n) || hv_unhex(s, n, f->gid, 16))
        return -EINVAL;
    if (hv_field(&p, end, &s, &n) || hv_unhex(s, n, f->mac, HV_SHA256_LEN))
        return -EINVAL;
    if (p >= end || (size_t)(end - p) > HV_PROTO_LINE_MAX)
        return -EINVAL;
    f->msg = p;
    f->msg_len = (size_t)(end - p);
    return 0;
}

int hv_auth_open(const uint8_t *key, size_t key_len, HvAuthSession *s, HvAuthDir dir,
                 const char *line, size_t len, HvAuthFrame *f)
{
    HvAuthSession t = *s;
    uint8_t mac[HV_SHA256_LEN];
    uint64_t want;

    if (hv_auth_frame_parse(line, len, f) < 0)
        return -EINVAL;
    if (dir == HV_AUTH_REQUEST && !t.have_c)
        memcpy(t.nonce_c, f->nonce, HV_AUTH_NONCE_LEN);
    hv_auth_mac(key, key_len, &t, dir, f->seq, f->gid, f->msg, f->msg_len, mac);
    if (!hv_mac_equal(mac, f->mac, sizeof(mac)))
        return -EACCES;
    /* a request comes once, in order; a reply answers the last request */
    want = dir == HV_AUTH_REQUEST ? s->seq + 1 : s->seq;
    if (memcmp(t.nonce_c, f->nonce, HV_AUTH_NONCE_LEN) != 0 || f->seq != want || want == 0)
        return -EPROTO;
    t.have_c = 1;
    t.seq = want;
    *s = t;
    return 0;
}
