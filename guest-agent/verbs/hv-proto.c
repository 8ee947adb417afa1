/* The layer <-> layer peer protocol: the one parser and the formatter (hv-proto.h). */
#include "hv-proto.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *p, *end;
} HvTok;

/* Next space-separated token; exactly one space between tokens, none at the ends. */
static int hv_tok(HvTok *t, const char **s, size_t *n)
{
    const char *q = t->p;

    if (t->p >= t->end)
        return 0;
    while (q < t->end && *q != ' ')
        q++;
    if (q == t->p)
        return -1; /* empty token: two spaces or a leading space */
    *s = t->p;
    *n = (size_t)(q - t->p);
    t->p = q < t->end ? q + 1 : q;
    if (q < t->end && t->p == t->end)
        return -1; /* trailing space */
    return 1;
}

static int hv_dec(HvTok *t, uint64_t max, uint64_t *out)
{
    const char *s;
    size_t n;
    uint64_t v = 0;

    if (hv_tok(t, &s, &n) != 1 || n > 20 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static int hv_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static int hv_hex32(const char *s, size_t n, uint32_t *out)
{
    uint32_t v = 0;

    if (n == 0 || n > 8)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int h = hv_hexval(s[i]);
        if (h < 0)
            return -1;
        v = (v << 4) | (uint32_t)h;
    }
    *out = v;
    return 0;
}

#define HV_U24 0xffffffu

static int hv_u32f(HvTok *t, uint64_t max, uint32_t *out)
{
    uint64_t v;

    if (hv_dec(t, max, &v) < 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int hv_text(HvTok *t, char *out)
{
    size_t n = (size_t)(t->end - t->p);

    if (n == 0 || n > HV_PROTO_TEXT_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t->p[i];
        if (c < 0x20 || c == 0x7f)
            return -1;
    }
    memcpy(out, t->p, n);
    out[n] = '\0';
    t->p = t->end;
    return 0;
}

/* A GID, or a route's tag: 16 bytes as 32 lower-case hex digits. */
static int hv_gid(HvTok *t, uint8_t gid[16])
{
    const char *s;
    size_t n;

    if (hv_tok(t, &s, &n) != 1 || n != 32)
        return -1;
    for (size_t i = 0; i < 16; i++) {
        int hi = hv_hexval(s[2 * i]), lo = hv_hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        gid[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* @n tokens "<hex>:<hex>", each value at most @max. */
static int hv_pairs(HvTok *t, HvKeyPair *out, uint32_t n, uint32_t max)
{
    for (uint32_t i = 0; i < n; i++) {
        const char *s, *colon;
        size_t len;

        if (hv_tok(t, &s, &len) != 1)
            return -1;
        colon = memchr(s, ':', len);
        if (!colon || hv_hex32(s, (size_t)(colon - s), &out[i].v) < 0 ||
            hv_hex32(colon + 1, len - (size_t)(colon - s) - 1, &out[i].p) < 0 ||
            out[i].v > max || out[i].p > max)
            return -1;
    }
    return 0;
}

/* The messages of both ends moving, of UD holds and of lookups; 0, -EINVAL, or 1 (not one of
 * them). */
static int hv_parse_more(HvTok *t_, const char *verb, size_t vn, HvMsg *m)
{
    HvTok t = *t_;
    uint64_t v;

#define IS(x) (vn == sizeof(x) - 1 && memcmp(verb, x, vn) == 0)
    if (IS("KEYMAP")) {
        m->type = HV_MSG_KEYMAP;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_u32f(&t, HV_U24, &m->sender) < 0 ||
            hv_dec(&t, HV_PROTO_KEYS_MAX, &v) < 0 || v == 0)
            return -EINVAL;
        m->nkeys = (uint32_t)v;
        if (hv_pairs(&t, m->keys, m->nkeys, UINT32_MAX) < 0)
            return -EINVAL;
    } else if (IS("KEYMAPPED")) {
        m->type = HV_MSG_KEYMAPPED;
    } else if (IS("DEFER")) {
        const char *w;
        size_t wn;

        m->type = HV_MSG_DEFER;
        if (hv_tok(&t, &w, &wn) != 1)
            return -EINVAL;
        if (wn == 6 && memcmp(w, "moving", 6) == 0)
            m->defer = HV_DEFER_MOVING;
        else if (wn == 11 && memcmp(w, "reconnected", 11) == 0)
            m->defer = HV_DEFER_RECONNECTED;
        else
            return -EINVAL;
    } else if (IS("UDHOLD")) {
        m->type = HV_MSG_UDHOLD;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_gid(&t, m->gid) < 0)
            return -EINVAL;
    } else if (IS("LOOKUP")) {
        m->type = HV_MSG_LOOKUP;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_u32f(&t, HV_U24, &m->sender) < 0 ||
            hv_gid(&t, m->gid) < 0)
            return -EINVAL;
    } else if (IS("LOOKEDUP")) {
        m->type = HV_MSG_LOOKEDUP;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_dec(&t, 0xffff, &v) < 0)
            return -EINVAL;
        m->lid = (uint16_t)v;
        if (hv_dec(&t, HV_PROTO_KEYS_MAX, &v) < 0)
            return -EINVAL;
        m->nkeys = (uint32_t)v;
        if (hv_pairs(&t, m->keys, m->nkeys, UINT32_MAX) < 0)
            return -EINVAL;
    } else if (IS("UDHELD")) {
        m->type = HV_MSG_UDHELD;
        if (hv_dec(&t, HV_PROTO_UDQPS_MAX, &v) < 0)
            return -EINVAL;
        m->nkeys = (uint32_t)v;
        if (hv_pairs(&t, m->keys, m->nkeys, UINT32_MAX) < 0)
            return -EINVAL;
        for (uint32_t i = 0; i < m->nkeys; i++)
            if (m->keys[i].v > HV_U24)
                return -EINVAL;
    } else {
        return 1;
    }
#undef IS
    *t_ = t;
    return 0;
}

/* "<gid> <lid> <nkeys> [<vkey>:<pkey>]..." (RECONNECT, SWITCH, SWITCHED): 0 or -1 */
static int hv_parse_tail(HvTok *t, HvMsg *m)
{
    uint64_t v;

    if (hv_gid(t, m->gid) < 0 || hv_dec(t, 0xffff, &v) < 0)
        return -1;
    m->lid = (uint16_t)v;
    if (hv_dec(t, HV_PROTO_KEYS_MAX, &v) < 0)
        return -1;
    m->nkeys = (uint32_t)v;
    return hv_pairs(t, m->keys, m->nkeys, UINT32_MAX);
}

int hv_proto_parse(const char *line, size_t len, HvMsg *m)
{
    HvTok t = {line, line + len};
    const char *verb;
    size_t vn;
    uint64_t v;
    int more;

    memset(m, 0, offsetof(HvMsg, keys));
    if (!line || len == 0 || len > HV_PROTO_LINE_MAX || memchr(line, '\0', len) ||
        memchr(line, '\n', len))
        return -EINVAL;
    if (hv_tok(&t, &verb, &vn) != 1)
        return -EINVAL;
#define IS(x) (vn == sizeof(x) - 1 && memcmp(verb, x, vn) == 0)
    if (IS("ROUTE")) {
        m->type = HV_MSG_ROUTE;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_gid(&t, m->tag) < 0)
            return -EINVAL;
    } else if (IS("ROUTED")) {
        m->type = HV_MSG_ROUTED;
    } else if (IS("NOROUTE") || IS("ERROR") || IS("FROM")) {
        m->type = IS("ERROR") ? HV_MSG_ERROR : IS("FROM") ? HV_MSG_FROM : HV_MSG_NOROUTE;
        if (hv_text(&t, m->text) < 0)
            return -EINVAL;
    } else if (IS("SUSPEND")) {
        m->type = HV_MSG_SUSPEND;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_u32f(&t, HV_U24, &m->sender) < 0 ||
            hv_dec(&t, UINT64_MAX, &m->sent) < 0)
            return -EINVAL;
    } else if (IS("SUSPENDED")) {
        m->type = HV_MSG_SUSPENDED;
        if (hv_dec(&t, UINT64_MAX, &m->sent) < 0)
            return -EINVAL;
    } else if (IS("RECONNECT") || IS("SWITCH")) {
        m->type = IS("SWITCH") ? HV_MSG_SWITCH : HV_MSG_RECONNECT;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_u32f(&t, HV_U24, &m->sender) < 0 ||
            hv_u32f(&t, HV_U24, &m->sender_pqpn) < 0 || hv_u32f(&t, HV_U24, &m->sender_psn) < 0 ||
            hv_u32f(&t, HV_U24, &m->target_psn) < 0 || hv_parse_tail(&t, m) < 0)
            return -EINVAL;
    } else if (IS("UDMAP")) {
        m->type = HV_MSG_UDMAP;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_gid(&t, m->gid) < 0 ||
            hv_dec(&t, 0xffff, &v) < 0)
            return -EINVAL;
        m->lid = (uint16_t)v;
        if (hv_dec(&t, HV_PROTO_UDQPS_MAX, &v) < 0 || v == 0)
            return -EINVAL;
        m->nkeys = (uint32_t)v;
        if (hv_pairs(&t, m->keys, m->nkeys, HV_U24) < 0)
            return -EINVAL;
    } else if (IS("UDMAPPED")) {
        m->type = HV_MSG_UDMAPPED;
    } else if (IS("SWITCHED")) {
        m->type = HV_MSG_SWITCHED;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_parse_tail(&t, m) < 0)
            return -EINVAL;
    } else if ((more = hv_parse_more(&t, verb, vn, m)) <= 0) {
        if (more < 0) /* KEYMAP, DEFER, UDHOLD, UDHELD, LOOKUP, LOOKEDUP */
            return -EINVAL;
    } else if (IS("RECONNECTED")) {
        m->type = HV_MSG_RECONNECTED;
        if (hv_u32f(&t, HV_U24, &m->target) < 0 || hv_dec(&t, 0xffff, &v) < 0)
            return -EINVAL;
        m->lid = (uint16_t)v;
    } else {
        return -EINVAL;
    }
#undef IS
    if (t.p != t.end)
        return -EINVAL; /* extra fields */
    return 0;
}

static int hv_text_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > HV_PROTO_TEXT_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* " <v>:<p>..." for @m's keys and the newline, after the @off bytes already in @buf. */
static int hv_format_pairs(const HvMsg *m, char *buf, size_t size, size_t off)
{
    int n;

    for (uint32_t i = 0; i < m->nkeys; i++) {
        n = snprintf(buf + off, size - off, " %x:%x", m->keys[i].v, m->keys[i].p);
        if (n < 0 || off + (size_t)n >= size)
            return -ENOSPC;
        off += (size_t)n;
    }
    if (off + 2 > size)
        return -ENOSPC;
    buf[off++] = '\n';
    buf[off] = '\0';
    return off > HV_PROTO_LINE_MAX + 1 ? -ENOSPC : (int)off;
}

/* "<gid> <lid> <nkeys> <v>:<p>...\n" after the @off bytes already in @buf. */
static int hv_format_tail(const HvMsg *m, char *buf, size_t size, size_t off)
{
    int n;

    for (int i = 0; i < 16; i++) {
        if (off + 3 > size)
            return -ENOSPC;
        snprintf(buf + off, 3, "%02x", m->gid[i]);
        off += 2;
    }
    n = snprintf(buf + off, size - off, " %u %u", m->lid, m->nkeys);
    if (n < 0 || off + (size_t)n >= size)
        return -ENOSPC;
    return hv_format_pairs(m, buf, size, off + (size_t)n);
}

/* The messages of both ends moving, of UD holds and of lookups (hv_parse_more's). */
static int hv_format_more(const HvMsg *m, char *buf, size_t size)
{
    int n = -1;

    switch (m->type) {
    case HV_MSG_KEYMAPPED:
        n = snprintf(buf, size, "KEYMAPPED\n");
        break;
    case HV_MSG_KEYMAP:
        if (m->nkeys == 0 || m->nkeys > HV_PROTO_KEYS_MAX || m->target > HV_U24 ||
            m->sender > HV_U24)
            return -EINVAL;
        n = snprintf(buf, size, "KEYMAP %u %u %u", m->target, m->sender, m->nkeys);
        if (n < 0 || (size_t)n >= size)
            return -ENOSPC;
        return hv_format_pairs(m, buf, size, (size_t)n);
    case HV_MSG_DEFER:
        if (m->defer != HV_DEFER_MOVING && m->defer != HV_DEFER_RECONNECTED)
            return -EINVAL;
        n = snprintf(buf, size, "DEFER %s\n",
                     m->defer == HV_DEFER_MOVING ? "moving" : "reconnected");
        break;
    case HV_MSG_UDHOLD: {
        char gid[33];

        if (m->target > HV_U24)
            return -EINVAL;
        for (int i = 0; i < 16; i++)
            snprintf(gid + 2 * i, 3, "%02x", m->gid[i]);
        n = snprintf(buf, size, "UDHOLD %u %s\n", m->target, gid);
        break;
    }
    case HV_MSG_LOOKUP: {
        char gid[33];

        if (m->target > HV_U24 || m->sender > HV_U24)
            return -EINVAL;
        for (int i = 0; i < 16; i++)
            snprintf(gid + 2 * i, 3, "%02x", m->gid[i]);
        n = snprintf(buf, size, "LOOKUP %u %u %s\n", m->target, m->sender, gid);
        break;
    }
    case HV_MSG_LOOKEDUP:
        if (m->target > HV_U24 || m->nkeys > HV_PROTO_KEYS_MAX)
            return -EINVAL;
        n = snprintf(buf, size, "LOOKEDUP %u %u %u", m->target, m->lid, m->nkeys);
        if (n < 0 || (size_t)n >= size)
            return -ENOSPC;
        return hv_format_pairs(m, buf, size, (size_t)n);
    case HV_MSG_UDHELD:
        if (m->nkeys > HV_PROTO_UDQPS_MAX)
            return -EINVAL;
        for (uint32_t i = 0; i < m->nkeys; i++)
            if (m->keys[i].v > HV_U24)
                return -EINVAL;
        n = snprintf(buf, size, "UDHELD %u", m->nkeys);
        if (n < 0 || (size_t)n >= size)
            return -ENOSPC;
        return hv_format_pairs(m, buf, size, (size_t)n);
    default:
        return -EINVAL;
    }
    if (n < 0 || (size_t)n >= size || (size_t)n > HV_PROTO_LINE_MAX + 1)
        return -ENOSPC;
    return n;
}

/* The messages that end in a GID, a LID and pairs (hv_format_tail): UDMAP, RECONNECT, SWITCH,
 * SWITCHED. */
static int hv_format_keyed(const HvMsg *m, char *buf, size_t size)
{
    int n;

    if (m->type == HV_MSG_UDMAP) {
        if (m->nkeys == 0 || m->nkeys > HV_PROTO_UDQPS_MAX || m->target > HV_U24)
            return -EINVAL;
        for (uint32_t i = 0; i < m->nkeys; i++)
            if (m->keys[i].v > HV_U24 || m->keys[i].p > HV_U24)
                return -EINVAL;
        n = snprintf(buf, size, "UDMAP %u ", m->target);
    } else if (m->type == HV_MSG_SWITCHED) {
        if (m->nkeys > HV_PROTO_KEYS_MAX || m->target > HV_U24)
            return -EINVAL;
        n = snprintf(buf, size, "SWITCHED %u ", m->target);
    } else {
        if (m->nkeys > HV_PROTO_KEYS_MAX)
            return -EINVAL;
        n = snprintf(buf, size, "%s %u %u %u %u %u ",
                     m->type == HV_MSG_SWITCH ? "SWITCH" : "RECONNECT", m->target, m->sender,
                     m->sender_pqpn, m->sender_psn, m->target_psn);
    }
    if (n < 0 || (size_t)n >= size)
        return -ENOSPC;
    return hv_format_tail(m, buf, size, (size_t)n);
}

int hv_proto_format(const HvMsg *m, char *buf, size_t size)
{
    int n = -1;

    switch (m->type) {
    case HV_MSG_ROUTE: {
        char tag[2 * HV_ROUTE_TAG_LEN + 1];

        if (m->target > HV_U24)
            return -EINVAL;
        for (int i = 0; i < HV_ROUTE_TAG_LEN; i++)
            snprintf(tag + 2 * i, 3, "%02x", m->tag[i]);
        n = snprintf(buf, size, "ROUTE %u %s\n", m->target, tag);
        break;
    }
    case HV_MSG_ROUTED:
        n = snprintf(buf, size, "ROUTED\n");
        break;
    case HV_MSG_NOROUTE:
    case HV_MSG_ERROR:
    case HV_MSG_FROM:
        if (!hv_text_ok(m->text))
            return -EINVAL;
        n = snprintf(buf, size, "%s %s\n",
                     m->type == HV_MSG_ERROR  ? "ERROR"
                     : m->type == HV_MSG_FROM ? "FROM"
                                              : "NOROUTE",
                     m->text);
        break;
    case HV_MSG_SUSPEND:
        n = snprintf(buf, size, "SUSPEND %u %u %llu\n", m->target, m->sender,
                     (unsigned long long)m->sent);
        break;
    case HV_MSG_SUSPENDED:
        n = snprintf(buf, size, "SUSPENDED %llu\n", (unsigned long long)m->sent);
        break;
    case HV_MSG_RECONNECTED:
        n = snprintf(buf, size, "RECONNECTED %u %u\n", m->target, m->lid);
        break;
    case HV_MSG_UDMAPPED:
        n = snprintf(buf, size, "UDMAPPED\n");
        break;
    case HV_MSG_KEYMAPPED:
    case HV_MSG_KEYMAP:
    case HV_MSG_DEFER:
    case HV_MSG_UDHOLD:
    case HV_MSG_UDHELD:
    case HV_MSG_LOOKUP:
    case HV_MSG_LOOKEDUP:
        return hv_format_more(m, buf, size);
    case HV_MSG_UDMAP:
    case HV_MSG_SWITCHED:
    case HV_MSG_RECONNECT:
    case HV_MSG_SWITCH:
        return hv_format_keyed(m, buf, size);
    }
    if (n < 0 || (size_t)n >= size)
        return -ENOSPC;
    if ((size_t)n > HV_PROTO_LINE_MAX + 1)
        return -ENOSPC;
    return n;
}
