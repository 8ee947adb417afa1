/* hm-pingpong data messages: header + a payload derived from the sequence number. */
#include "tests/workload/wl.h"

#include <string.h>

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

uint64_t wl_fnv1a64(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* splitmix64: a different byte stream for every seq. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_payload(uint8_t *p, size_t len, uint64_t seq)
{
    uint64_t state = seq ^ 0x484d574c484d574cull;
    size_t i = 0;
    while (i < len) {
        uint64_t r = splitmix64(&state);
        for (int b = 0; b < 8 && i < len; b++, i++) {
            p[i] = (uint8_t)(r >> (8 * b));
        }
    }
}

static int payload_matches(const uint8_t *p, size_t len, uint64_t seq)
{
    uint64_t state = seq ^ 0x484d574c484d574cull;
    size_t i = 0;
    while (i < len) {
        uint64_t r = splitmix64(&state);
        for (int b = 0; b < 8 && i < len; b++, i++) {
            if (p[i] != (uint8_t)(r >> (8 * b))) {
                return 0;
            }
        }
    }
    return 1;
}

void wl_msg_encode(uint8_t *buf, size_t size, uint64_t seq)
{
    size_t plen = size - WL_MSG_HEADER_SIZE;
    uint8_t *payload = buf + WL_MSG_HEADER_SIZE;

    fill_payload(payload, plen, seq);
    put_u32(buf, WL_MSG_MAGIC);
    put_u32(buf + 4, (uint32_t)size);
    put_u64(buf + 8, seq);
    put_u64(buf + 16, wl_fnv1a64(payload, plen));
}

uint64_t wl_msg_peek_seq(const uint8_t *buf, size_t len)
{
    if (len < WL_MSG_HEADER_SIZE) {
        return 0;
    }
    return get_u64(buf + 8);
}

WlMsgStatus wl_msg_verify(const uint8_t *buf, size_t len, size_t size, const uint64_t *want_seq,
                          uint64_t *ret_seq)
{
    if (len < WL_MSG_HEADER_SIZE) {
        return WL_MSG_BAD_LENGTH;
    }
    uint64_t seq = get_u64(buf + 8);
    if (ret_seq) {
        *ret_seq = seq;
    }
    if (get_u32(buf) != WL_MSG_MAGIC) {
        return WL_MSG_BAD_MAGIC;
    }
    if (len != size || get_u32(buf + 4) != size) {
        return WL_MSG_BAD_LENGTH;
    }
    if (want_seq && seq != *want_seq) {
        return WL_MSG_BAD_SEQ;
    }
    const uint8_t *payload = buf + WL_MSG_HEADER_SIZE;
    size_t plen = size - WL_MSG_HEADER_SIZE;
    if (wl_fnv1a64(payload, plen) != get_u64(buf + 16)) {
        return WL_MSG_BAD_CHECKSUM;
    }
    if (!payload_matches(payload, plen, seq)) {
        return WL_MSG_BAD_PAYLOAD;
    }
    return WL_MSG_OK;
}

static const char *const msg_status_names[WL_MSG_LAST] = {
    [WL_MSG_OK] = "ok",
    [WL_MSG_BAD_MAGIC] = "bad magic",
    [WL_MSG_BAD_LENGTH] = "bad length",
    [WL_MSG_BAD_SEQ] = "unexpected seq",
    [WL_MSG_BAD_CHECKSUM] = "checksum mismatch",
    [WL_MSG_BAD_PAYLOAD] = "payload mismatch",
};

const char *wl_msg_status_to_string(WlMsgStatus status)
{
    if ((unsigned)status >= WL_MSG_LAST) {
        return "unknown";
    }
    return msg_status_names[status];
}
