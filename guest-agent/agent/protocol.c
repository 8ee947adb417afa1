/* Parsers for the two protocols the agent speaks: newline-delimited JSON from the host and
 * text lines from processes (see docs/design.md). Both inputs are untrusted: every byte is
 * validated and every size is bounded. */
#include "guest-agent/agent/agent-priv.h"

#include <json-glib/json-glib.h>
#include <string.h>

G_DEFINE_QUARK(hotmig - agent - error - quark, agent_error)

HM_ENUM_IMPL(agent_state, AgentState, AGENT_STATE_LAST, "running", "prepared")
HM_ENUM_IMPL(agent_proc_mode, AgentProcMode, AGENT_PROC_MODE_LAST, "lazy", "threaded")
HM_ENUM_IMPL(agent_proc_state, AgentProcState, AGENT_PROC_STATE_LAST, "running", "quiescing",
             "quiesced", "resuming", "failed")

/* Error classes and commands: the string tables are generated from the schema. */
const char *agent_error_class_to_string(AgentError value)
{
    return hm_enum_to_string(agent_error_names, AGENT_ERROR_LAST, (int)value);
}

int agent_error_class_from_string(const char *str)
{
    return hm_enum_from_string(agent_error_names, AGENT_ERROR_LAST, str);
}

const char *agent_command_to_string(AgentCommand value)
{
    if ((int)value < 0 || value >= AGENT_COMMAND_LAST)
        return NULL;
    return agent_command_specs[value].name;
}

int agent_command_from_string(const char *str)
{
    for (int i = 0; str && i < AGENT_COMMAND_LAST; i++) {
        if (g_str_equal(agent_command_specs[i].name, str))
            return i;
    }
    return -1;
}

/* ---- framing ----------------------------------------------------------------------------- */

void agent_framer_init(AgentFramer *framer, gsize max, gboolean sync_byte,
                       gboolean oversize_at_once)
{
    g_return_if_fail(max >= 2);
    framer->oversize_at_once = oversize_at_once;
    framer->buf = g_string_sized_new(MIN(max, 1024));
    framer->max = max;
    framer->sync_byte = sync_byte;
    framer->discarding = FALSE;
}

void agent_framer_init_host(AgentFramer *framer)
{
    agent_framer_init(framer, AGENT_HOST_LINE_MAX, TRUE, FALSE);
}

void agent_framer_clear(AgentFramer *framer)
{
    if (framer->buf)
        g_string_free(framer->buf, TRUE);
    framer->buf = NULL;
}

void agent_framer_reset(AgentFramer *framer)
{
    g_string_truncate(framer->buf, 0);
    framer->discarding = FALSE;
}

gboolean agent_framer_feed(AgentFramer *framer, const guint8 *data, gsize len, AgentFrameFunc func,
                           gpointer user_data)
{
    while (len > 0) {
        const guint8 *nl = memchr(data, '\n', len);
        gsize chunk = nl ? (gsize)(nl - data) : len;
        const guint8 *sync = framer->sync_byte ? memchr(data, AGENT_SYNC_BYTE, chunk) : NULL;
        gboolean go_on;

        if (sync) {
            agent_framer_reset(framer);
            len -= (gsize)(sync - data) + 1;
            data = sync + 1;
            if (!func(AGENT_FRAME_SYNC, "", 0, user_data))
                return FALSE;
            continue;
        }
        if (!framer->discarding) {
            /* The line and its newline must fit in max bytes. */
            if (framer->buf->len + chunk + 1 > framer->max) {
                framer->discarding = TRUE;
                g_string_truncate(framer->buf, 0);
                if (framer->oversize_at_once && !func(AGENT_FRAME_OVERSIZE, "", 0, user_data))
                    return FALSE;
            } else {
                g_string_append_len(framer->buf, (const char *)data, (gssize)chunk);
            }
        }
        if (!nl)
            return TRUE;
        data = nl + 1;
        len -= chunk + 1;
        if (framer->discarding) {
            framer->discarding = FALSE;
            go_on = framer->oversize_at_once || func(AGENT_FRAME_OVERSIZE, "", 0, user_data);
        } else {
            g_autoptr(GString) line = g_steal_pointer(&framer->buf);

            framer->buf = g_string_sized_new(MIN(framer->max, 1024));
            if (line->len > 0 && line->str[line->len - 1] == '\r')
                g_string_truncate(line, line->len - 1);
            go_on = func(AGENT_FRAME_LINE, line->str, line->len, user_data);
        }
        if (!go_on)
            return FALSE;
    }
    return TRUE;
}

/* ---- host requests ----------------------------------------------------------------------- */

/* Looks at the request before json-glib does: json-glib is a recursive parser (so nesting is
 * bounded here), reads more than strict JSON (single-quoted strings, comments: refused, or the
 * nesting counted here would not be the one it reads) and accepts data after the first value
 * (refused here). */
static gboolean agent_json_prescan(const char *line, gsize len, GError **error)
{
    g_autoptr(GError) local = NULL;

    if (hm_json_check_one(line, (gssize)len, AGENT_JSON_DEPTH_MAX, &local))
        return TRUE;
    g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_JSON, "Request: %s", local->message);
    return FALSE;
}

static gboolean agent_line_is_printable_name(const char *s)
{
    gsize n = strlen(s);

    if (n == 0 || n > 32)
        return FALSE;
    for (gsize i = 0; i < n; i++) {
        if (!g_ascii_isalnum(s[i]) && s[i] != '-' && s[i] != '_')
            return FALSE;
    }
    return TRUE;
}

static gboolean agent_arg_get_int(JsonObject *args, const char *field, gint64 min, gint64 max,
                                  gint64 *ret, GError **error)
{
    JsonNode *node = args ? json_object_get_member(args, field) : NULL;
    gint64 value;

    if (!node) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER, "Missing argument '%s'",
                    field);
        return FALSE;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                    "Argument '%s' must be an integer", field);
        return FALSE;
    }
    value = json_node_get_int(node);
    if (value < min || value > max) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                    "Argument '%s' is out of range [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                    field, min, max);
        return FALSE;
    }
    *ret = value;
    return TRUE;
}

/* Every member of @args must be declared in @specs (NULL-terminated; NULL for none). */
static gboolean agent_args_check(JsonObject *args, const AgentArgSpec *specs, GError **error)
{
    g_autoptr(GList) members = args ? json_object_get_members(args) : NULL;

    for (GList *l = members; l; l = l->next) {
        const char *member = l->data;
        gboolean known = FALSE;

        for (const AgentArgSpec *spec = specs; spec && spec->name && !known; spec++)
            known = g_str_equal(spec->name, member);
        if (!known) {
            if (agent_line_is_printable_name(member))
                g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Unexpected argument '%s'", member);
            else
                g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                                    "Unexpected argument (name not shown)");
            return FALSE;
        }
    }
    return TRUE;
}

/* Checks @args against the schema's specs of @command and stores the values in @req. */
static gboolean agent_args_apply(AgentCommand command, JsonObject *args, AgentRequest *req,
                                 GError **error)
{
    const AgentArgSpec *specs = agent_command_specs[command].args;

    if (!agent_args_check(args, specs, error))
        return FALSE;
    for (const AgentArgSpec *spec = specs; spec && spec->name; spec++) {
        gint64 value;

        if (!spec->required && (!args || !json_object_has_member(args, spec->name)))
            continue;
        g_assert(spec->type == AGENT_ARG_INT);
        if (!agent_arg_get_int(args, spec->name, spec->min, spec->max, &value, error))
            return FALSE;
        if (g_str_equal(spec->name, "id"))
            req->sync_id = value;
        else if (g_str_equal(spec->name, "timeout_ms"))
            req->timeout_ms = (guint)value;
        else if (g_str_equal(spec->name, "protocol"))
            req->protocol = (gint)value;
        else if (g_str_equal(spec->name, "standby"))
            req->no_standby = value == 0;
        else
            g_assert_not_reached(); /* the schema declares an argument the agent lacks */
    }
    return TRUE;
}

/* @line (@len bytes) read as a JSON object, within the size limit and valid UTF-8: the parser
 * (owned), its root object into @ret_root (borrowed from the parser). */
static JsonParser *agent_request_load(const char *line, gsize len, JsonObject **ret_root,
                                      GError **error)
{
    g_autoptr(JsonParser) parser = NULL;
    g_autoptr(GError) local_error = NULL;
    JsonNode *node;

    if (len >= AGENT_HOST_LINE_MAX) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_TOO_LARGE, "Request is longer than %d bytes",
                    AGENT_HOST_LINE_MAX);
        return NULL;
    }
    if (memchr(line, '\0', len) || !g_utf8_validate(line, (gssize)len, NULL)) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_JSON,
                            "Request is not valid UTF-8 text");
        return NULL;
    }
    if (!agent_json_prescan(line, len, error))
        return NULL;
    parser = json_parser_new_immutable();
    if (!json_parser_load_from_data(parser, line, (gssize)len, &local_error)) {
        /* json-glib quotes the input and may cut it inside a UTF-8 sequence. */
        g_autofree char *valid = g_utf8_make_valid(local_error->message, -1);
        g_autofree char *shown = g_utf8_substring(valid, 0, MIN(g_utf8_strlen(valid, -1), 160));

        g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_JSON, "Invalid JSON: %s", shown);
        return NULL;
    }
    node = json_parser_get_root(parser);
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_JSON,
                            "Request is not a JSON object");
        return NULL;
    }
    *ret_root = json_node_get_object(node);
    return g_steal_pointer(&parser);
}

/* The request @root has no member but "execute" and "arguments". */
static gboolean agent_request_members_check(JsonObject *root, GError **error)
{
    g_autoptr(GList) members = json_object_get_members(root);

    for (GList *l = members; l; l = l->next) {
        const char *member = l->data;

        if (g_str_equal(member, "execute") || g_str_equal(member, "arguments"))
            continue;
        if (agent_line_is_printable_name(member))
            g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                        "Unexpected member '%s' in request", member);
        else
            g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                                "Unexpected member in request (name not shown)");
        return FALSE;
    }
    return TRUE;
}

/* The command the request @root's "execute" names, into @ret. */
static gboolean agent_request_command(JsonObject *root, AgentCommand *ret, GError **error)
{
    JsonNode *node = json_object_get_member(root, "execute");
    const char *execute;
    int command;

    if (!node) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Missing member 'execute'");
        return FALSE;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Member 'execute' must be a string");
        return FALSE;
    }
    execute = json_node_get_string(node);
    command = agent_command_from_string(execute);
    if (command < 0) {
        if (agent_line_is_printable_name(execute))
            g_set_error(error, AGENT_ERROR, AGENT_ERROR_COMMAND_NOT_FOUND,
                        "The command '%s' is not known", execute);
        else
            g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_COMMAND_NOT_FOUND,
                                "The command is not known (name not shown)");
        return FALSE;
    }
    *ret = (AgentCommand)command;
    return TRUE;
}

gboolean agent_request_parse(const char *line, gsize len, AgentRequest *ret, GError **error)
{
    g_autoptr(JsonParser) parser = NULL;
    AgentRequest req = {0};
    JsonObject *root = NULL;
    JsonObject *args = NULL;
    JsonNode *node;

    g_return_val_if_fail(line != NULL, FALSE);

    parser = agent_request_load(line, len, &root, error);
    if (!parser || !agent_request_members_check(root, error) ||
        !agent_request_command(root, &req.command, error))
        return FALSE;
    node = json_object_get_member(root, "arguments");
    if (node) {
        if (!JSON_NODE_HOLDS_OBJECT(node)) {
            g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                                "Member 'arguments' must be an object");
            return FALSE;
        }
        args = json_node_get_object(node);
    }

    if (!agent_args_apply(req.command, args, &req, error))
        return FALSE;
    *ret = req;
    return TRUE;
}

/* ---- process messages -------------------------------------------------------------------- */

static gboolean agent_parse_seq(const char *str, guint64 *ret, GError **error)
{
    guint64 value;

    if (!g_ascii_string_to_unsigned(str, 10, 1, G_MAXUINT64, &value, NULL) ||
        !g_ascii_isdigit(str[0])) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Field 'seq' is not a positive decimal number");
        return FALSE;
    }
    *ret = value;
    return TRUE;
}

/* A token: 1..@max bytes, printable ASCII or UTF-8, no white space or control bytes. */
static gboolean agent_token_ok(const char *str, gsize max)
{
    gsize n = strlen(str);

    if (n == 0 || n > max || !g_utf8_validate(str, (gssize)n, NULL))
        return FALSE;
    for (gsize i = 0; i < n; i++) {
        guchar c = (guchar)str[i];

        if (c <= 0x20 || c == 0x7f)
            return FALSE;
    }
    return TRUE;
}

/* HELLO version pid mode name (@line: the whole line). */
static gboolean proc_msg_hello(const char *line, AgentProcMsg *msg, GError **error)
{
    g_auto(GStrv) hello = g_strsplit(line, " ", 6);
    guint64 pid;
    int mode;

    if (g_strv_length(hello) != 5) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "HELLO needs exactly 4 fields: version pid mode name");
        return FALSE;
    }
    if (strlen(hello[1]) == 0 || strlen(hello[1]) >= sizeof(msg->version) ||
        strspn(hello[1], "0123456789.") != strlen(hello[1])) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Field 'version' is not a version number");
        return FALSE;
    }
    if (!g_ascii_isdigit(hello[2][0]) ||
        !g_ascii_string_to_unsigned(hello[2], 10, 1, G_MAXINT, &pid, NULL)) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Field 'pid' is not a process id");
        return FALSE;
    }
    mode = agent_proc_mode_from_string(hello[3]);
    if (mode < 0) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Field 'mode' is neither 'lazy' nor 'threaded'");
        return FALSE;
    }
    if (!agent_token_ok(hello[4], AGENT_NAME_MAX)) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                    "Field 'name' must be 1 to %d printable bytes without white space",
                    AGENT_NAME_MAX);
        return FALSE;
    }
    msg->kind = AGENT_MSG_HELLO;
    g_strlcpy(msg->version, hello[1], sizeof(msg->version));
    msg->pid = (gint)pid;
    msg->mode = (AgentProcMode)mode;
    g_strlcpy(msg->name, hello[4], sizeof(msg->name));
    return TRUE;
}

/* FAILED seq reason (@fields: the line split in 3, @n of them). */
static gboolean proc_msg_failed(char **fields, guint n, AgentProcMsg *msg, GError **error)
{
    if (n != 3 || fields[2][0] == '\0') {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "FAILED needs 2 fields: seq reason");
        return FALSE;
    }
    if (!agent_parse_seq(fields[1], &msg->seq, error))
        return FALSE;
    for (const char *p = fields[2]; *p; p++) {
        if ((guchar)*p < 0x20 || *p == 0x7f) {
            g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                                "Field 'reason' holds a control character");
            return FALSE;
        }
    }
    msg->kind = AGENT_MSG_FAILED;
    g_strlcpy(msg->reason, fields[2], sizeof(msg->reason));
    return TRUE;
}

/* PEER <gid: 32 lower-case hex digits>/<qpn: decimal < 2^24> */
static gboolean proc_msg_peer(char **fields, guint n, AgentProcMsg *msg, GError **error)
{
    const char *slash = n == 2 ? strchr(fields[1], '/') : NULL;
    guint64 qpn;

    if (!slash || slash - fields[1] != 32 || strspn(fields[1], "0123456789abcdef") != 32 ||
        !g_ascii_isdigit(slash[1]) || (slash[1] == '0' && slash[2] != '\0') ||
        !g_ascii_string_to_unsigned(slash + 1, 10, 0, (1u << 24) - 1, &qpn, NULL)) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "PEER needs 1 field: gid/qpn (32 lower-case hex digits, a QP "
                            "number below 2^24)");
        return FALSE;
    }
    for (guint i = 0; i < 16; i++)
        msg->gid[i] = (guint8)(g_ascii_xdigit_value(fields[1][2 * i]) << 4 |
                               g_ascii_xdigit_value(fields[1][2 * i + 1]));
    msg->qpn = (guint32)qpn;
    msg->kind = AGENT_MSG_PEER;
    return TRUE;
}

/* STATS <used: 0|1>/<switched>/<paused>/<sends>/<receives>/<ms>: decimal, no leading zeros,
 * each bounded (agent-priv.h); one word of at most AGENT_STATS_WORD_MAX bytes. */
static gboolean proc_msg_stats(char **fields, guint n, AgentProcMsg *msg, GError **error)
{
    static const char *const names[6] = {"used", "switched", "paused", "sends", "receives", "ms"};
    static const guint64 max[6] = {1,
                                   AGENT_STATS_QPS_MAX,
                                   AGENT_STATS_QPS_MAX,
                                   AGENT_STATS_COUNT_MAX,
                                   AGENT_STATS_COUNT_MAX,
                                   AGENT_STATS_MS_MAX};
    g_auto(GStrv) parts = NULL;
    guint64 v[6];

    if (n == 2 && strlen(fields[1]) <= AGENT_STATS_WORD_MAX)
        parts = g_strsplit(fields[1], "/", 7);
    if (!parts || g_strv_length(parts) != 6) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                    "STATS needs one word of at most %d bytes: "
                    "used/switched/paused/sends/receives/ms",
                    AGENT_STATS_WORD_MAX);
        return FALSE;
    }
    for (guint i = 0; i < 6; i++) {
        if (!g_ascii_isdigit(parts[i][0]) || (parts[i][0] == '0' && parts[i][1] != '\0') ||
            !g_ascii_string_to_unsigned(parts[i], 10, 0, max[i], &v[i], NULL)) {
            g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                        "STATS '%s' must be a decimal from 0 to %" G_GUINT64_FORMAT
                        " without leading zeros",
                        names[i], max[i]);
            return FALSE;
        }
    }
    msg->stats.used = v[0] == 1;
    msg->stats.switched = (guint)v[1];
    msg->stats.paused = (guint)v[2];
    msg->stats.sends = v[3];
    msg->stats.recvs = v[4];
    msg->stats.ms = (guint)v[5];
    msg->kind = AGENT_MSG_STATS;
    return TRUE;
}

/* One message by its first word (@copy: the line, @fields: it split in 3, @n of them). */
static gboolean proc_msg_dispatch(const char *copy, char **fields, guint n, AgentProcMsg *msg,
                                  GError **error)
{
    if (g_str_equal(fields[0], "HELLO"))
        return proc_msg_hello(copy, msg, error);
    if (g_str_equal(fields[0], "DONE")) {
        if (n != 2) {
            g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                                "DONE needs exactly 1 field: seq");
            return FALSE;
        }
        if (!agent_parse_seq(fields[1], &msg->seq, error))
            return FALSE;
        msg->kind = AGENT_MSG_DONE;
        return TRUE;
    }
    if (g_str_equal(fields[0], "FAILED"))
        return proc_msg_failed(fields, n, msg, error);
    if (g_str_equal(fields[0], "PEER"))
        return proc_msg_peer(fields, n, msg, error);
    if (g_str_equal(fields[0], "STATS"))
        return proc_msg_stats(fields, n, msg, error);
    if (g_str_equal(fields[0], "REFUSED")) {
        if (n != 2 || !agent_token_ok(fields[1], AGENT_CALL_MAX)) {
            g_set_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                        "REFUSED needs 1 field: call (1 to %d printable bytes without white "
                        "space)",
                        AGENT_CALL_MAX);
            return FALSE;
        }
        g_strlcpy(msg->call, fields[1], sizeof(msg->call));
        msg->kind = AGENT_MSG_REFUSED;
        return TRUE;
    }
    if (g_str_equal(fields[0], "STANDBY")) {
        if (n != 1) {
            g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                                "STANDBY takes no field");
            return FALSE;
        }
        msg->kind = AGENT_MSG_STANDBY;
        return TRUE;
    }
    g_set_error_literal(
        error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
        "Unknown message (expected HELLO, DONE, FAILED, PEER, REFUSED, STATS or STANDBY)");
    return FALSE;
}

gboolean agent_proc_msg_parse(const char *line, gsize len, AgentProcMsg *ret, GError **error)
{
    g_autofree char *copy = NULL;
    g_auto(GStrv) fields = NULL;
    AgentProcMsg msg = {0};
    guint n;

    g_return_val_if_fail(line != NULL, FALSE);

    if (len >= AGENT_PROC_LINE_MAX) {
        g_set_error(error, AGENT_ERROR, AGENT_ERROR_TOO_LARGE, "Line is longer than %d bytes",
                    AGENT_PROC_LINE_MAX);
        return FALSE;
    }
    if (memchr(line, '\0', len) || !g_utf8_validate(line, (gssize)len, NULL)) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER,
                            "Line is not valid UTF-8 text");
        return FALSE;
    }
    copy = g_strndup(line, len);
    fields = g_strsplit(copy, " ", 3);
    n = g_strv_length(fields);
    if (n == 0) {
        g_set_error_literal(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER, "Empty line");
        return FALSE;
    }
    if (!proc_msg_dispatch(copy, fields, n, &msg, error))
        return FALSE;
    *ret = msg;
    return TRUE;
}
