/* hm-pingpong control protocol: one command per line, fields separated by one space. */
#include "tests/workload/wl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define WL_CTL_FIELDS_MAX 8

static const char *const ctl_names[WL_CTL_LAST] = {
    [WL_CTL_HELLO] = "HELLO",   [WL_CTL_QP] = "QP",         [WL_CTL_RTS] = "RTS",
    [WL_CTL_PAUSE] = "PAUSE",   [WL_CTL_PAUSED] = "PAUSED", [WL_CTL_DONE] = "DONE",
    [WL_CTL_RESULT] = "RESULT",
};

/* Number of fields after the command word. */
static const int ctl_nfields[WL_CTL_LAST] = {
    [WL_CTL_HELLO] = 3,  [WL_CTL_QP] = 6,   [WL_CTL_RTS] = 0,    [WL_CTL_PAUSE] = 2,
    [WL_CTL_PAUSED] = 1, [WL_CTL_DONE] = 0, [WL_CTL_RESULT] = 5,
};

static const char *const role_names[WL_ROLE_LAST] = {
    [WL_ROLE_SERVER] = "server",
    [WL_ROLE_CLIENT] = "client",
};

static const char *const pause_kind_names[WL_PAUSE_LAST] = {
    [WL_PAUSE_QUIESCE] = "quiesce",
    [WL_PAUSE_FATAL] = "fatal",
    [WL_PAUSE_RESET] = "reset",
};

const char *wl_role_to_string(WlRole role)
{
    return (unsigned)role < WL_ROLE_LAST ? role_names[role] : "unknown";
}

int wl_role_from_string(const char *s)
{
    for (int i = 0; i < WL_ROLE_LAST; i++) {
        if (strcmp(s, role_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

const char *wl_pause_kind_to_string(WlPauseKind kind)
{
    return (unsigned)kind < WL_PAUSE_LAST ? pause_kind_names[kind] : "unknown";
}

int wl_pause_kind_from_string(const char *s)
{
    for (int i = 0; i < WL_PAUSE_LAST; i++) {
        if (strcmp(s, pause_kind_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

int wl_dev_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= WL_DEV_NAME_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

/* Strict unsigned decimal: digits only, no sign, no leading zeros (except "0"), <= max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
    uint64_t v = 0;
    size_t n = strlen(s);
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0')) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -EINVAL;
        }
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -ERANGE;
        }
        v = v * 10 + d;
    }
    if (v > max) {
        return -ERANGE;
    }
    *ret = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

static int parse_gid(const char *s, uint8_t gid[16])
{
    if (strlen(s) != 32) {
        return -EINVAL;
    }
    for (int i = 0; i < 16; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -EINVAL;
        }
        gid[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static int mtu_valid(uint64_t mtu)
{
    return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

int wl_ctl_parse(const char *line, WlCtlMsg *ret_msg, char *err, size_t errlen)
{
    char copy[WL_CTL_LINE_MAX];
    char *fields[WL_CTL_FIELDS_MAX + 1];
    int nf = 0;
    size_t n = strnlen(line, WL_CTL_LINE_MAX);
    WlCtlMsg msg;
    uint64_t v[5];

    if (n >= WL_CTL_LINE_MAX) {
        wl_err_set(err, errlen, "control line longer than %d bytes", WL_CTL_LINE_MAX - 1);
        return -EMSGSIZE;
    }
    for (size_t i = 0; i < n; i++) {
        if (line[i] < 0x21 && line[i] != ' ') {
            wl_err_set(err, errlen, "control line has a control character at offset %zu", i);
            return -EINVAL;
        }
        if ((unsigned char)line[i] > 0x7e) {
            wl_err_set(err, errlen, "control line has a non-ASCII byte at offset %zu", i);
            return -EINVAL;
        }
    }
    memcpy(copy, line, n + 1);
    /* Exactly one space between fields, none at either end. */
    char *p = copy;
    for (;;) {
        char *sp = strchr(p, ' ');
        if (sp == p || *p == '\0') {
            wl_err_set(err, errlen, "control line '%s' has an empty field", line);
            return -EINVAL;
        }
        if (nf > WL_CTL_FIELDS_MAX) {
            wl_err_set(err, errlen, "control line '%s' has too many fields", line);
            return -EINVAL;
        }
        fields[nf++] = p;
        if (!sp) {
            break;
        }
        *sp = '\0';
        p = sp + 1;
    }

    memset(&msg, 0, sizeof(msg));
    msg.type = WL_CTL_LAST;
    for (int i = 0; i < WL_CTL_LAST; i++) {
        if (strcmp(fields[0], ctl_names[i]) == 0) {
            msg.type = (WlCtlType)i;
        }
    }
    if (msg.type == WL_CTL_LAST) {
        wl_err_set(err, errlen, "unknown control command '%s'", fields[0]);
        return -EINVAL;
    }
    if (nf - 1 != ctl_nfields[msg.type]) {
        wl_err_set(err, errlen, "control command '%s' needs %d fields, got %d", fields[0],
                ctl_nfields[msg.type], nf - 1);
        return -EINVAL;
    }

    switch (msg.type) {
    case WL_CTL_HELLO: {
        int role = wl_role_from_string(fields[3]);
        if (strcmp(fields[1], WL_CTL_PROTO) != 0) {
            wl_err_set(err, errlen, "HELLO: protocol '%s' is not '%s'", fields[1], WL_CTL_PROTO);
            return -EPROTO;
        }
        if (parse_u64(fields[2], 1000, &v[0]) < 0) {
            wl_err_set(err, errlen, "HELLO: bad version '%s'", fields[2]);
            return -EINVAL;
        }
        if (role < 0) {
            wl_err_set(err, errlen, "HELLO: bad role '%s'", fields[3]);
            return -EINVAL;
        }
        msg.u.hello.version = (unsigned)v[0];
        msg.u.hello.role = (WlRole)role;
        break;
    }
    case WL_CTL_QP:
        if (!wl_dev_name_valid(fields[1])) {
            wl_err_set(err, errlen, "QP: bad device name '%s'", fields[1]);
            return -EINVAL;
        }
        snprintf(msg.u.qp.dev, sizeof(msg.u.qp.dev), "%s", fields[1]);
        if (parse_u64(fields[2], 0xffff, &v[0]) < 0) {
            wl_err_set(err, errlen, "QP: bad lid '%s'", fields[2]);
            return -EINVAL;
        }
        if (parse_u64(fields[3], 0xffffff, &v[1]) < 0 || v[1] == 0) {
            wl_err_set(err, errlen, "QP: bad qpn '%s'", fields[3]);
            return -EINVAL;
        }
        if (parse_u64(fields[4], 0xffffff, &v[2]) < 0) {
            wl_err_set(err, errlen, "QP: bad psn '%s'", fields[4]);
            return -EINVAL;
        }
        if (parse_gid(fields[5], msg.u.qp.gid) < 0) {
            wl_err_set(err, errlen, "QP: bad gid '%s' (want 32 lower-case hex digits)", fields[5]);
            return -EINVAL;
        }
        if (parse_u64(fields[6], 4096, &v[3]) < 0 || !mtu_valid(v[3])) {
            wl_err_set(err, errlen, "QP: bad mtu '%s'", fields[6]);
            return -EINVAL;
        }
        msg.u.qp.lid = (uint32_t)v[0];
        msg.u.qp.qpn = (uint32_t)v[1];
        msg.u.qp.psn = (uint32_t)v[2];
        msg.u.qp.mtu = (uint32_t)v[3];
        break;
    case WL_CTL_PAUSE: {
        int kind = wl_pause_kind_from_string(fields[2]);
        if (parse_u64(fields[1], UINT32_MAX, &v[0]) < 0) {
            wl_err_set(err, errlen, "PAUSE: bad cycle '%s'", fields[1]);
            return -EINVAL;
        }
        if (kind < 0) {
            wl_err_set(err, errlen, "PAUSE: bad kind '%s'", fields[2]);
            return -EINVAL;
        }
        msg.u.pause.cycle = v[0];
        msg.u.pause.kind = (WlPauseKind)kind;
        break;
    }
    case WL_CTL_PAUSED:
        if (parse_u64(fields[1], UINT32_MAX, &v[0]) < 0) {
            wl_err_set(err, errlen, "PAUSED: bad cycle '%s'", fields[1]);
            return -EINVAL;
        }
        msg.u.pause.cycle = v[0];
        break;
    case WL_CTL_RESULT: {
        static const char *const names[5] = {"received", "duplicates", "corrupt", "cycles",
                                             "verbs_errors"};
        for (int i = 0; i < 5; i++) {
            if (parse_u64(fields[1 + i], UINT64_MAX, &v[i]) < 0) {
                wl_err_set(err, errlen, "RESULT: bad %s '%s'", names[i], fields[1 + i]);
                return -EINVAL;
            }
        }
        msg.u.result.received = v[0];
        msg.u.result.duplicates = v[1];
        msg.u.result.corrupt = v[2];
        msg.u.result.cycles = v[3];
        msg.u.result.verbs_errors = v[4];
        break;
    }
    case WL_CTL_RTS:
    case WL_CTL_DONE:
    case WL_CTL_LAST:
        break;
    }
    *ret_msg = msg;
    return 0;
}

int wl_ctl_format(const WlCtlMsg *msg, char *buf, size_t buflen)
{
    int n;
    switch (msg->type) {
    case WL_CTL_HELLO:
        n = snprintf(buf, buflen, "HELLO %s %u %s\n", WL_CTL_PROTO, msg->u.hello.version,
                     wl_role_to_string(msg->u.hello.role));
        break;
    case WL_CTL_QP: {
        char gid[33];
        const WlQpInfo *q = &msg->u.qp;
        if (!wl_dev_name_valid(q->dev) || q->qpn == 0 || q->qpn > 0xffffff || q->psn > 0xffffff ||
            q->lid > 0xffff || !mtu_valid(q->mtu)) {
            return -EINVAL;
        }
        for (int i = 0; i < 16; i++) {
            snprintf(gid + 2 * i, 3, "%02x", q->gid[i]);
        }
        n = snprintf(buf, buflen, "QP %s %" PRIu32 " %" PRIu32 " %" PRIu32 " %s %" PRIu32 "\n",
                     q->dev, q->lid, q->qpn, q->psn, gid, q->mtu);
        break;
    }
    case WL_CTL_RTS:
        n = snprintf(buf, buflen, "RTS\n");
        break;
    case WL_CTL_PAUSE:
        if ((unsigned)msg->u.pause.kind >= WL_PAUSE_LAST) {
            return -EINVAL;
        }
        n = snprintf(buf, buflen, "PAUSE %" PRIu64 " %s\n", msg->u.pause.cycle,
                     wl_pause_kind_to_string(msg->u.pause.kind));
        break;
    case WL_CTL_PAUSED:
        n = snprintf(buf, buflen, "PAUSED %" PRIu64 "\n", msg->u.pause.cycle);
        break;
    case WL_CTL_DONE:
        n = snprintf(buf, buflen, "DONE\n");
        break;
    case WL_CTL_RESULT: {
        const WlResultCounts *r = &msg->u.result;
        n = snprintf(buf, buflen,
                     "RESULT %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                     r->received, r->duplicates, r->corrupt, r->cycles, r->verbs_errors);
        break;
    }
    case WL_CTL_LAST:
    default:
        return -EINVAL;
    }
    if (n < 0 || (size_t)n >= buflen || n >= WL_CTL_LINE_MAX) {
        return -EINVAL;
    }
    return n;
}

int wl_linebuf_push(WlLineBuf *lb, const char *data, size_t len)
{
    if (len > sizeof(lb->buf) - lb->len) {
        return -ENOBUFS;
    }
    memcpy(lb->buf + lb->len, data, len);
    lb->len += len;
    return 0;
}

int wl_linebuf_next(WlLineBuf *lb, char *line, size_t linelen)
{
    char *nl = memchr(lb->buf, '\n', lb->len);
    if (!nl) {
        return lb->len >= WL_CTL_LINE_MAX ? -EMSGSIZE : 0;
    }
    size_t n = (size_t)(nl - lb->buf);
    if (n + 1 > WL_CTL_LINE_MAX || n + 1 > linelen) {
        return -EMSGSIZE;
    }
    memcpy(line, lb->buf, n);
    line[n] = '\0';
    if (memchr(line, '\0', n)) {
        return -EBADMSG; /* embedded NUL */
    }
    memmove(lb->buf, nl + 1, lb->len - n - 1);
    lb->len -= n + 1;
    return 1;
}
