/* The peer directory's announcement datagram (docs/protocol.md "Directory announcements"):
 * one strict parser for what arrives from the control network (hostile: fuzzed by
 * tests/fuzz/directory-fuzz.c) and the formatter of what this agent sends.
 *
 *   hotmig-dir 1 announce VIA BOOT-ID SINCE SEQ REFRESH ADDR PORT N[ GID/LID]...\n */
#include "guest-agent/agent/directory.h"

#include <arpa/inet.h>
#include <string.h>

HM_ENUM_IMPL(agent_dir_via, AgentDirVia, AGENT_DIR_VIA_LAST, "group", "seed", "relay")

#define DIR_MSG_MAGIC "hotmig-dir"
#define DIR_MSG_VERSION "1"
#define DIR_MSG_KIND "announce"
#define DIR_MSG_FIELDS 11 /* before the ports */

static gboolean dir_msg_fail(GError **error, const char *field, const char *what)
{
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                "directory announcement: field '%s' %s", field, what);
    return FALSE;
}

/* A decimal without leading zeros ("0" itself allowed) in [min, max]. */
static gboolean dir_msg_number(const char *tok, guint64 min, guint64 max, guint64 *ret)
{
    guint64 v = 0;
    gsize n = strlen(tok);

    if (n == 0 || n > 20 || (tok[0] == '0' && n > 1))
        return FALSE;
    for (gsize i = 0; i < n; i++) {
        if (!g_ascii_isdigit(tok[i]))
            return FALSE;
        if (v > (G_MAXUINT64 - (guint64)(tok[i] - '0')) / 10)
            return FALSE;
        v = v * 10 + (guint64)(tok[i] - '0');
    }
    if (v < min || v > max)
        return FALSE;
    *ret = v;
    return TRUE;
}

/* Exactly 2 * @n lower-case hex digits. */
static gboolean dir_msg_hex(const char *tok, gsize tok_len, guint8 *out, gsize n)
{
    if (tok_len != 2 * n)
        return FALSE;
    for (gsize i = 0; i < 2 * n; i++)
        if (!g_ascii_isdigit(tok[i]) && !(tok[i] >= 'a' && tok[i] <= 'f'))
            return FALSE;
    for (gsize i = 0; i < n; i++)
        out[i] =
            (guint8)(g_ascii_xdigit_value(tok[2 * i]) << 4 | g_ascii_xdigit_value(tok[2 * i + 1]));
    return TRUE;
}

/* An IPv4 or IPv6 literal of a unicast address; canonical text into @out. */
static gboolean dir_msg_addr(const char *tok, char out[AGENT_DIR_ADDR_MAX])
{
    struct in6_addr a6;
    struct in_addr a4;

    if (strlen(tok) >= AGENT_DIR_ADDR_MAX || strspn(tok, "0123456789abcdefABCDEF.:") != strlen(tok))
        return FALSE;
    if (inet_pton(AF_INET, tok, &a4) == 1) {
        guint32 h = ntohl(a4.s_addr);

        if (h == 0 || IN_MULTICAST(h) || h == G_MAXUINT32)
            return FALSE;
        return inet_ntop(AF_INET, &a4, out, AGENT_DIR_ADDR_MAX) != NULL;
    }
    if (inet_pton(AF_INET6, tok, &a6) == 1) {
        if (IN6_IS_ADDR_UNSPECIFIED(&a6) || IN6_IS_ADDR_MULTICAST(&a6))
            return FALSE;
        return inet_ntop(AF_INET6, &a6, out, AGENT_DIR_ADDR_MAX) != NULL;
    }
    return FALSE;
}

/* One "GID/LID" into @port; a GID that is all zero is refused. */
static gboolean dir_msg_port(const char *tok, AgentDirPort *port)
{
    static const guint8 zero[16];
    const char *slash = strchr(tok, '/');
    guint64 lid = 0;

    if (!slash || !dir_msg_hex(tok, (gsize)(slash - tok), port->gid, 16) ||
        memcmp(port->gid, zero, 16) == 0 || !dir_msg_number(slash + 1, 0, G_MAXUINT16, &lid))
        return FALSE;
    port->lid = (guint16)lid;
    return TRUE;
}

/* The header fields (tokens 0..10) into @m. */
static gboolean dir_msg_header(char **tok, AgentDirMsg *m, guint64 *n, GError **error)
{
    guint64 v = 0;
    int via;

    if (!g_str_equal(tok[0], DIR_MSG_MAGIC))
        return dir_msg_fail(error, "magic", "is not '" DIR_MSG_MAGIC "'");
    if (!g_str_equal(tok[1], DIR_MSG_VERSION))
        return dir_msg_fail(error, "version", "is not " DIR_MSG_VERSION);
    if (!g_str_equal(tok[2], DIR_MSG_KIND))
        return dir_msg_fail(error, "kind", "is not '" DIR_MSG_KIND "'");
    via = agent_dir_via_from_string(tok[3]);
    if (via < 0)
        return dir_msg_fail(error, "via", "is not group, seed or relay");
    m->via = (AgentDirVia)via;
    if (!dir_msg_hex(tok[4], strlen(tok[4]), m->boot_id, 16))
        return dir_msg_fail(error, "boot-id", "is not 32 lower-case hex digits");
    if (!dir_msg_number(tok[5], 0, G_MAXINT64, &m->since_ms))
        return dir_msg_fail(error, "since", "is not a time in ms");
    if (!dir_msg_number(tok[6], 1, G_MAXINT64, &m->seq))
        return dir_msg_fail(error, "seq", "is not a number in [1, 2^63)");
    if (!dir_msg_number(tok[7], 1, AGENT_DIR_REFRESH_S_MAX, &v))
        return dir_msg_fail(error, "refresh", "is not in [1, 3600]");
    m->refresh_s = (guint)v;
    if (!dir_msg_addr(tok[8], m->addr))
        return dir_msg_fail(error, "addr", "is not a unicast IPv4 or IPv6 address");
    if (!dir_msg_number(tok[9], 1, G_MAXUINT16, &v))
        return dir_msg_fail(error, "port", "is not in [1, 65535]");
    m->port = (guint16)v;
    if (!dir_msg_number(tok[10], 0, AGENT_DIR_PORTS_MAX, n))
        return dir_msg_fail(error, "n", "is not in [0, 32]");
    return TRUE;
}

gboolean agent_dir_msg_parse(const char *data, gsize len, AgentDirMsg *ret, GError **error)
{
    g_autofree char *line = NULL;
    g_auto(GStrv) tok = NULL;
    g_autofree AgentDirMsg *m = g_new0(AgentDirMsg, 1);
    guint64 n = 0;

    g_return_val_if_fail(data != NULL || len == 0, FALSE);
    if (len > AGENT_DIR_MSG_MAX) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TOO_LARGE,
                    "directory announcement: %" G_GSIZE_FORMAT " bytes (more than %d)", len,
                    AGENT_DIR_MSG_MAX);
        return FALSE;
    }
    if (len == 0 || data[len - 1] != '\n')
        return dir_msg_fail(error, "line", "does not end with a newline");
    for (gsize i = 0; i + 1 < len; i++)
        if ((guchar)data[i] < 0x21 && data[i] != ' ')
            return dir_msg_fail(error, "line", "holds a control byte");
    for (gsize i = 0; i + 1 < len; i++)
        if ((guchar)data[i] > 0x7e)
            return dir_msg_fail(error, "line", "is not ASCII");
    line = g_strndup(data, len - 1);
    tok = g_strsplit(line, " ", -1);
    if (g_strv_length(tok) < DIR_MSG_FIELDS)
        return dir_msg_fail(error, "line", "has too few fields");
    if (!dir_msg_header(tok, m, &n, error))
        return FALSE;
    if (g_strv_length(tok) != DIR_MSG_FIELDS + n)
        return dir_msg_fail(error, "n", "does not match the number of ports");
    for (guint i = 0; i < n; i++) {
        if (!dir_msg_port(tok[DIR_MSG_FIELDS + i], &m->ports[i]))
            return dir_msg_fail(error, "port entry", "is not GID/LID (32 hex digits, 0..65535)");
        for (guint k = 0; k < i; k++)
            if (memcmp(m->ports[k].gid, m->ports[i].gid, 16) == 0)
                return dir_msg_fail(error, "port entry", "repeats a GID");
    }
    m->n_ports = (guint)n;
    *ret = *m;
    return TRUE;
}

gsize agent_dir_msg_format(const AgentDirMsg *msg, char *buf, gsize size)
{
    g_autoptr(GString) s = g_string_sized_new(AGENT_DIR_MSG_MAX);

    g_return_val_if_fail(msg != NULL && msg->via < AGENT_DIR_VIA_LAST, 0);
    g_string_append_printf(s, DIR_MSG_MAGIC " " DIR_MSG_VERSION " " DIR_MSG_KIND " %s ",
                           agent_dir_via_to_string(msg->via));
    for (guint i = 0; i < 16; i++)
        g_string_append_printf(s, "%02x", msg->boot_id[i]);
    g_string_append_printf(s, " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %u %s %u %u",
                           msg->since_ms, msg->seq, msg->refresh_s, msg->addr, msg->port,
                           msg->n_ports);
    for (guint i = 0; i < msg->n_ports && i < AGENT_DIR_PORTS_MAX; i++) {
        g_string_append_c(s, ' ');
        for (guint k = 0; k < 16; k++)
            g_string_append_printf(s, "%02x", msg->ports[i].gid[k]);
        g_string_append_printf(s, "/%u", msg->ports[i].lid);
    }
    g_string_append_c(s, '\n');
    if (s->len > AGENT_DIR_MSG_MAX || s->len >= size)
        return 0;
    memcpy(buf, s->str, s->len + 1);
    return s->len;
}
