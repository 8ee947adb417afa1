/* The verbs layer's authenticated peer channel (docs/protocol.md, "Authentication";
 * docs/security.md, "The verbs peer protocol"): SHA-256 and HMAC-SHA256 (hv-sha256.c) and the
 * frame every peer message travels in (hv-auth.c, its one parser, fuzzed). libc only: part of
 * the preloaded library and of its tests and fuzz target.
 *
 * After the agent's ROUTED the called layer sends "CHALLENGE <nonce_s>"; every message then
 * travels as "AUTH <nonce_c> <seq> <gid> <mac> <message>": nonce_c the caller's (fresh per
 * connection), seq 1, 2, ... per request (a reply carries its request's), gid the sender's
 * GID, mac = HMAC-SHA256(job key, label, direction, nonce_s, nonce_c, seq, gid, message). */
#ifndef HV_AUTH_H
#define HV_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "hv-proto.h"

#define HV_SHA256_LEN 32
typedef struct {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} HvSha256;
void hv_sha256_init(HvSha256 *s);
void hv_sha256_update(HvSha256 *s, const void *data, size_t len);
void hv_sha256_final(HvSha256 *s, uint8_t out[HV_SHA256_LEN]); /* clears @s */

typedef struct {
    HvSha256 inner, outer;
} HvHmac;
void hv_hmac_init(HvHmac *h, const void *key, size_t key_len);
void hv_hmac_update(HvHmac *h, const void *data, size_t len);
void hv_hmac_final(HvHmac *h, uint8_t out[HV_SHA256_LEN]);
/* 1 when the @n bytes are equal; the time taken does not depend on where they differ. */
int hv_mac_equal(const uint8_t *a, const uint8_t *b, size_t n);

#define HV_AUTH_NONCE_LEN 16
#define HV_AUTH_KEY_MIN 16   /* bytes of HOTMIG_VERBS_KEY / the key file */
#define HV_AUTH_KEY_MAX 1024
/* A frame: "AUTH " 32 hex, seq (<= 20 digits), 32 hex, 64 hex, four spaces, the message. */
#define HV_AUTH_LINE_MAX (HV_PROTO_LINE_MAX + 160)
#define HV_AUTH_CHALLENGE_MS 5000 /* the caller's first frame must come this soon */

/* Which way a frame goes: part of what its MAC covers, so a reply is not a request. */
typedef enum {
    HV_AUTH_REQUEST = 'q',
    HV_AUTH_REPLY = 'r',
} HvAuthDir;

/* One connection's session: nonce_s the called end's challenge, nonce_c the caller's; seq the
 * last request's number (the caller: sent; the called end: received). */
typedef struct HvAuthSession {
    uint8_t nonce_s[HV_AUTH_NONCE_LEN], nonce_c[HV_AUTH_NONCE_LEN];
    int have_c; /* the called end: nonce_c taken from the first frame */
    uint64_t seq;
} HvAuthSession;

/* A frame as read: borrowed pointers into the line. */
typedef struct {
    uint8_t nonce[HV_AUTH_NONCE_LEN];
    uint64_t seq;
    uint8_t gid[16];
    uint8_t mac[HV_SHA256_LEN];
    const char *msg; /* the message, without newline */
    size_t msg_len;
} HvAuthFrame;

/* "CHALLENGE <32 hex>\n" into @buf; its length or -ENOSPC. */
int hv_auth_challenge_format(const uint8_t nonce[HV_AUTH_NONCE_LEN], char *buf, size_t size);
/* One line (no newline): 0, or -EINVAL when it is not a CHALLENGE. */
int hv_auth_challenge_parse(const char *line, size_t len, uint8_t nonce[HV_AUTH_NONCE_LEN]);
/* The MAC of a frame of session @s going @dir. */
void hv_auth_mac(const uint8_t *key, size_t key_len, const HvAuthSession *s, HvAuthDir dir,
                 uint64_t seq, const uint8_t gid[16], const char *msg, size_t msg_len,
                 uint8_t mac[HV_SHA256_LEN]);
/* Seals @msg (@msg_len bytes, no newline) into "AUTH ...\n" in @buf: its length, or -ENOSPC,
 * -EINVAL (a message longer than HV_PROTO_LINE_MAX or holding a newline). */
int hv_auth_seal(const uint8_t *key, size_t key_len, const HvAuthSession *s, HvAuthDir dir,
                 uint64_t seq, const uint8_t gid[16], const char *msg, size_t msg_len, char *buf,
                 size_t size);
/* Parses one frame line (no newline), syntax only (strict: lower-case hex, decimal seq without
 * leading zeros, one space between fields, a non-empty message): 0 or -EINVAL. */
int hv_auth_frame_parse(const char *line, size_t len, HvAuthFrame *f);
/* The tag of QP @vqpn's route (HV_ROUTE_TAG_LEN bytes): the first bytes of
 * HMAC-SHA256(key, "hotmig-verbs-route 1" NUL, vqpn as 4 bytes big-endian). The layer writes it
 * into the QP's route record, a caller names it in its ROUTE: without the job's key a ROUTE
 * cannot name a registered QP, and a scan is told nothing. */
void hv_auth_route_tag(const uint8_t *key, size_t key_len, uint32_t vqpn,
                       uint8_t tag[HV_ROUTE_TAG_LEN]);
/* Reads a frame going @dir in session @s: 0 (the called end takes nonce_c from the first
 * frame and @s->seq advances to the request's), -EINVAL malformed, -EACCES the MAC does not
 * verify (another key), -EPROTO replayed or out of order (nonce or seq not this session's). */
int hv_auth_open(const uint8_t *key, size_t key_len, HvAuthSession *s, HvAuthDir dir,
                 const char *line, size_t len, HvAuthFrame *f);

#endif
