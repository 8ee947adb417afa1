/* libhotmig-verbs: the authenticated peer channel's primitives (guest-agent/verbs/hv-auth.h):
 * SHA-256 (FIPS 180-2 examples), HMAC-SHA256 (RFC 4231 test cases 1-7), and the frame every
 * peer message travels in: a frame verifies only with the job's key, in its own connection
 * (the called end's challenge, the caller's nonce), once, in order, in its own direction. */
#include "hv-auth.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void hex(char *out, const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", v[i]);
}

static void sha(const void *data, size_t len, char out[65])
{
    HvSha256 s;
    uint8_t d[HV_SHA256_LEN];

    hv_sha256_init(&s);
    hv_sha256_update(&s, data, len);
    hv_sha256_final(&s, d);
    hex(out, d, sizeof(d));
}

static void test_sha256_vectors(void **state)
{
    char out[65];
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    HvSha256 s;
    uint8_t d[HV_SHA256_LEN];
    char block[1000];

    (void)state;
    sha("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha("", 0, out);
    assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha(m448, strlen(m448), out);
    assert_string_equal(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a', fed in uneven pieces (the buffered path) */
    memset(block, 'a', sizeof(block));
    hv_sha256_init(&s);
    for (size_t left = 1000000, k = 1; left; k = k % 997 + 1) {
        size_t take = k < left ? k : left;
        hv_sha256_update(&s, block, take);
        left -= take;
    }
    hv_sha256_final(&s, d);
    hex(out, d, sizeof(d));
    assert_string_equal(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_hmac_rfc4231(void **state)
{
    static const struct {
        uint8_t key_byte;
        size_t key_len;
        const char *key; /* when not repeated bytes */
        const char *data;
        uint8_t data_byte;
        size_t data_len;
        const char *mac;
        size_t mac_len; /* case 5: truncated to 128 bits */
    } cases[] = {
        {0x0b, 20, NULL, "Hi There", 0, 0,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32},
        {0, 4, "Jefe", "what do ya want for nothing?", 0, 0,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32},
        {0xaa, 20, NULL, NULL, 0xdd, 50,
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32},
        {0, 25, "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14"
                "\x15\x16\x17\x18\x19",
         NULL, 0xcd, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 32},
        {0x0c, 20, NULL, "Test With Truncation", 0, 0, "a3b6167473100ee06e0c796c2955552b", 16},
        {0xaa, 131, NULL, "Test Using Larger Than Block-Size Key - Hash Key First", 0, 0,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32},
        {0xaa, 131, NULL,
         "This is a test using a larger than block-size key and a larger than block-size data. "
         "The key needs to be hashed before being used by the HMAC algorithm.",
         0, 0, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t key[131], data[64], mac[HV_SHA256_LEN];
        char out[65];
        const void *d = cases[i].data;
        size_t dl = cases[i].data ? strlen(cases[i].data) : cases[i].data_len;
        HvHmac h;

        if (cases[i].key)
            memcpy(key, cases[i].key, cases[i].key_len);
        else
            memset(key, cases[i].key_byte, cases[i].key_len);
        if (!d) {
            memset(data, cases[i].data_byte, dl);
            d = data;
        }
        hv_hmac_init(&h, key, cases[i].key_len);
        hv_hmac_update(&h, d, dl);
        hv_hmac_final(&h, mac);
        hex(out, mac, cases[i].mac_len);
        assert_string_equal(out, cases[i].mac);
    }
}

static const uint8_t key[] = "0123456789abcdef-the-job-key";
static const uint8_t other_key[] = "0123456789abcdef-another-key";
static const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};

/* A session as both ends see it after the challenge and the first frame. */
static void session(HvAuthSession *s, uint8_t fill_s, uint8_t fill_c)
{
    memset(s, 0, sizeof(*s));
    memset(s->nonce_s, fill_s, sizeof(s->nonce_s));
    memset(s->nonce_c, fill_c, sizeof(s->nonce_c));
}

static int seal(const uint8_t *k, const HvAuthSession *s, HvAuthDir dir, uint64_t seq,
                const char *msg, char *buf, size_t size)
{
    return hv_auth_seal(k, sizeof(key) - 1, s, dir, seq, gid, msg, strlen(msg), buf, size);
}

static void test_challenge(void **state)
{
    uint8_t n[HV_AUTH_NONCE_LEN], back[HV_AUTH_NONCE_LEN];
    char buf[64];
    int len;

    (void)state;
    for (int i = 0; i < HV_AUTH_NONCE_LEN; i++)
        n[i] = (uint8_t)(i * 17);
    len = hv_auth_challenge_format(n, buf, sizeof(buf));
    assert_string_equal(buf, "CHALLENGE 00112233445566778899aabbccddeeff\n");
    assert_int_equal(hv_auth_challenge_parse(buf, (size_t)len - 1, back), 0);
    assert_memory_equal(n, back, sizeof(n));
    assert_int_equal(hv_auth_challenge_parse("CHALLENGE 00112233445566778899AABBCCDDEEFF", 42, back),
                     -EINVAL);
    assert_int_equal(hv_auth_challenge_parse("CHALLENGE 0011", 14, back), -EINVAL);
    assert_int_equal(hv_auth_challenge_parse("ROUTED", 6, back), -EINVAL);
}

static void test_frame_round_trip(void **state)
{
    HvAuthSession caller, called;
    HvAuthFrame f;
    char buf[512];
    int n;

    (void)state;
    session(&caller, 0x11, 0x22);
    session(&called, 0x11, 0); /* the called end knows only its challenge */
    n = seal(key, &caller, HV_AUTH_REQUEST, 1, "SUSPEND 18 17 190", buf, sizeof(buf));
    assert_true(n > 0 && buf[n - 1] == '\n');
    assert_int_equal(strncmp(buf, "AUTH 22222222222222222222222222222222 1 "
                                  "00000000000000000000ffffc0000201 ",
                             72),
                     0);
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &called, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     0);
    assert_int_equal(f.seq, 1);
    assert_memory_equal(f.gid, gid, 16);
    assert_int_equal(f.msg_len, strlen("SUSPEND 18 17 190"));
    assert_memory_equal(f.msg, "SUSPEND 18 17 190", f.msg_len);
    assert_true(called.have_c);
    assert_memory_equal(called.nonce_c, caller.nonce_c, HV_AUTH_NONCE_LEN);
    /* the reply, in the same session, to request 1 */
    caller.seq = 1;
    n = seal(key, &called, HV_AUTH_REPLY, 1, "SUSPENDED 190", buf, sizeof(buf));
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &caller, HV_AUTH_REPLY, buf,
                                  (size_t)n - 1, &f),
                     0);
    assert_memory_equal(f.msg, "SUSPENDED 190", f.msg_len);
}

static void test_frame_refused(void **state)
{
    HvAuthSession caller, called, fresh;
    HvAuthFrame f;
    char buf[512], bad[512];
    int n;

    (void)state;
    session(&caller, 0x11, 0x22);
    session(&called, 0x11, 0);
    n = seal(key, &caller, HV_AUTH_REQUEST, 1, "RECONNECT 18 17 99 1 2 "
                                               "00000000000000000000ffffc0000201 0 0",
             buf, sizeof(buf));
    /* another key (a layer of another job, or none) */
    fresh = called;
    assert_int_equal(hv_auth_open(other_key, sizeof(other_key) - 1, &fresh, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     -EACCES);
    assert_false(fresh.have_c);
    /* one byte of the message changed: QPN 99 -> 98 */
    memcpy(bad, buf, (size_t)n);
    strstr(bad, " 99 ")[2] = '8';
    fresh = called;
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &fresh, HV_AUTH_REQUEST, bad,
                                  (size_t)n - 1, &f),
                     -EACCES);
    /* another sender GID claimed */
    memcpy(bad, buf, (size_t)n);
    bad[5 + 33 + 2 + 31] = '2';
    fresh = called;
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &fresh, HV_AUTH_REQUEST, bad,
                                  (size_t)n - 1, &f),
                     -EACCES);
    /* replayed into another connection (another challenge) */
    session(&fresh, 0x33, 0);
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &fresh, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     -EACCES);
    /* a request taken as a reply */
    fresh = caller;
    fresh.seq = 1;
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &fresh, HV_AUTH_REPLY, buf, (size_t)n - 1,
                                  &f),
                     -EACCES);
    /* once: the same frame again in its own connection */
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &called, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     0);
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &called, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     -EPROTO);
    /* in order: request 3 before 2 */
    n = seal(key, &caller, HV_AUTH_REQUEST, 3, "LOOKUP 18 17", buf, sizeof(buf));
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &called, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     -EPROTO);
    /* a second caller nonce within the connection */
    session(&fresh, 0x11, 0x44);
    n = seal(key, &fresh, HV_AUTH_REQUEST, 2, "LOOKUP 18 17", buf, sizeof(buf));
    assert_int_equal(hv_auth_open(key, sizeof(key) - 1, &called, HV_AUTH_REQUEST, buf,
                                  (size_t)n - 1, &f),
                     -EACCES);
    assert_int_equal(called.seq, 1);
}

static void test_frame_malformed(void **state)
{
    static const char *bad[] = {
        "SUSPEND 18 17 190",
        "AUTH",
        "AUTH ",
        "AUTH 22222222222222222222222222222222 1 00000000000000000000ffffc0000201",
        "AUTH 2222222222222222222222222222222 1 00000000000000000000ffffc0000201 "
        "0000000000000000000000000000000000000000000000000000000000000000 ROUTED",
        "AUTH 22222222222222222222222222222222 01 00000000000000000000ffffc0000201 "
        "0000000000000000000000000000000000000000000000000000000000000000 ROUTED",
        "AUTH 22222222222222222222222222222222 1 00000000000000000000FFFFc0000201 "
        "0000000000000000000000000000000000000000000000000000000000000000 ROUTED",
        "AUTH 22222222222222222222222222222222  1 00000000000000000000ffffc0000201 "
        "0000000000000000000000000000000000000000000000000000000000000000 ROUTED",
        "AUTH 22222222222222222222222222222222 1 00000000000000000000ffffc0000201 "
        "0000000000000000000000000000000000000000000000000000000000000000 ",
        "AUTH 22222222222222222222222222222222 18446744073709551616 "
        "00000000000000000000ffffc0000201 "
        "0000000000000000000000000000000000000000000000000000000000000000 ROUTED",
    };
    HvAuthFrame f;
    char *huge;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(hv_auth_frame_parse(bad[i], strlen(bad[i]), &f), -EINVAL);
    huge = malloc(HV_AUTH_LINE_MAX + 2);
    assert_non_null(huge);
    memset(huge, 'x', HV_AUTH_LINE_MAX + 1);
    memcpy(huge, bad[4], strlen(bad[4]));
    assert_int_equal(hv_auth_frame_parse(huge, HV_AUTH_LINE_MAX + 1, &f), -EINVAL);
    free(huge);
    assert_int_equal(hv_auth_frame_parse(NULL, 0, &f), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors), cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_challenge),      cmocka_unit_test(test_frame_round_trip),
        cmocka_unit_test(test_frame_refused),  cmocka_unit_test(test_frame_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
